package actor

import (
	"slices"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// delivery is one record delivered to an effector, parsed once on arrival.
type delivery struct {
	msg       jetstream.Msg
	rec       records.Record
	err       error // from records.FromMsg: the record cannot be decoded
	seq       uint64
	delivered uint64
}

// deliver receives a record the partition dispatched to the effector. ok is
// false when the effector stopped (passivated meanwhile): the partition then
// hands the record to a new one. overflow is true when the effector now holds
// so many records that it must read its own mailbox (see overflow.go). While
// it does, the partition's records of it are dropped (drop is true: its own
// consumer delivers them; the partition acknowledges them if it may, see
// "Drops"), or parked while it leaves that mode.
func (e *effector) deliver(d delivery) (ok, overflow, drop bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return false, false, false
	}
	if e.ovf != nil {
		if e.ovf.draining {
			e.ovf.parked = append(e.ovf.parked, d)
			return true, false, false
		}
		e.ovf.droppedMax = max(e.ovf.droppedMax, d.seq)
		return true, false, true
	}
	e.holdLocked(d)
	return true, e.overflowing(), false
}

// hold takes a record into the effector's held records.
func (e *effector) hold(d delivery) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped {
		e.holdLocked(d)
	}
}

// holdLocked takes a record into the held records and starts the drain
// goroutine if it does not run. The caller holds mu.
func (e *effector) holdLocked(d delivery) {
	for i := range e.held {
		if e.held[i].seq == d.seq { // redelivered while held: keep the newer handle
			e.held[i].msg, e.held[i].delivered = d.msg, d.delivered
			return
		}
	}
	if d.err == nil && d.rec.Type == TypeCancel && d.rec.Process != "" {
		if e.cancelled == nil {
			e.cancelled = map[string]uint64{}
		}
		e.cancelled[d.rec.Process] = max(e.cancelled[d.rec.Process], d.seq)
		if e.handCancel != nil && e.handProcess == d.rec.Process {
			e.handCancel(ErrCancelled)
		}
	}
	if len(e.held) == 0 {
		e.heldProgress = time.Now()
	}
	e.held = append(e.held, d)
	e.maxSeen = max(e.maxSeen, d.seq)
	if !e.running {
		e.running = true
		e.node.busy.add(e)
		e.drainers.Add(1)
		go e.drain()
	}
}

// wake starts the drain goroutine if it does not run, with nothing held:
// an effector that reads its own mailbox then tries again to leave it.
func (e *effector) wake() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || e.running || e.ovf == nil {
		return
	}
	e.running = true
	e.node.busy.add(e)
	e.drainers.Add(1)
	go e.drain()
}

// drain processes held records until none is left or the effector stops.
func (e *effector) drain() {
	defer e.drainers.Done()
	for {
		e.mu.Lock()
		e.progress = time.Now()
		if !e.stopped && len(e.held) == 0 && e.ovf != nil {
			e.mu.Unlock()
			e.leaveOverflow() // parked records, if any, are held again
			e.mu.Lock()
		}
		if e.stopped || len(e.held) == 0 {
			e.running = false
			e.node.busy.remove(e)
			e.cancelled = nil
			e.lastActive = time.Now()
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if !e.load() {
			continue // stopped, or its records went to dead letters
		}
		n := e.kind.maxBatch
		if e.alone > 0 {
			n, e.alone = 1, e.alone-1
		}
		e.mu.Lock()
		batch := e.take(n)
		e.mu.Unlock()
		e.process(batch)
	}
}

// take removes up to n held records, in the order they are to be applied:
// high priority first, then stream order. The caller holds mu.
func (e *effector) take(n int) []delivery {
	var out []delivery
	for len(out) < n && len(e.held) > 0 {
		i := 0
		for j, d := range e.held {
			if d.rec.Priority == records.PriorityHigh {
				i = j
				break
			}
		}
		out = append(out, e.held[i])
		e.held = slices.Delete(e.held, i, i+1) // clears the freed slot: no stale record kept alive
	}
	if len(e.held) == 0 {
		e.held = nil
	}
	return out
}

// putBack returns records taken but not processed to the front of held.
func (e *effector) putBack(ds []delivery) {
	if len(ds) == 0 {
		return
	}
	e.mu.Lock()
	e.held = append(slices.Clone(ds), e.held...)
	e.mu.Unlock()
}

// abandonHeld drops the records held when the effector is stopping: they
// stay unacknowledged, and whoever reads the partition next gets them again.
func (e *effector) abandonHeld() {
	e.mu.Lock()
	e.held = nil
	e.mu.Unlock()
}

// idleSince returns how long the effector has had nothing to do: no record
// in hand or held; 0 while it is busy.
func (e *effector) idleSince(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running || len(e.held) > 0 || e.stopped {
		return 0
	}
	return now.Sub(e.lastActive)
}

// backlog is how many records wait behind the one in hand.
func (e *effector) backlog() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.held)
}
