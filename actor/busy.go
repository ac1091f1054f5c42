package actor

import "sync"

// busySet is the set of a node's effectors whose drain goroutine runs:
// those with records held or in hand. The watchdog, the stall watch and the
// backlog gauge look at these only, so what they cost follows the work in
// progress, not the number of effectors loaded (each loaded effector stays
// in memory for the idle timeout after its last record).
type busySet struct {
	// mu guards set. It is taken inside effector.mu (an effector joins and
	// leaves as its drain goroutine starts and ends), never around it.
	mu  sync.Mutex
	set map[*effector]struct{}
}

func (b *busySet) add(e *effector) {
	b.mu.Lock()
	if b.set == nil {
		b.set = make(map[*effector]struct{})
	}
	b.set[e] = struct{}{}
	b.mu.Unlock()
}

func (b *busySet) remove(e *effector) {
	b.mu.Lock()
	delete(b.set, e)
	b.mu.Unlock()
}

// list returns the busy effectors.
func (b *busySet) list() []*effector {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*effector, 0, len(b.set))
	for e := range b.set {
		out = append(out, e)
	}
	return out
}
