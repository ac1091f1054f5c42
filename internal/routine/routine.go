// Package routine starts long-lived goroutines on record, as hashicorp/raft's
// goFunc does: each one under a name, counted by its owner, which waits for
// all of them before it says it stopped. An owner keeps one Group per set of
// goroutines it stops together, and lists them beside the Group's field.
package routine

import (
	"maps"
	"sync"
)

// Group is a set of named goroutines an owner waits for. The zero value is
// ready to use; a Group must not be copied after first use.
type Group struct {
	wg sync.WaitGroup

	mu      sync.Mutex     // guards running
	running map[string]int // goroutines running now, by name
}

// Go runs f in a goroutine named name (what it does, e.g.
// "placement.heartbeat"); [Group.Wait] waits for it. f must return when its
// owner tells it to stop (a context, a closed channel).
func (g *Group) Go(name string, f func()) {
	g.mu.Lock()
	if g.running == nil {
		g.running = map[string]int{}
	}
	g.running[name]++
	g.mu.Unlock()
	g.wg.Go(func() {
		defer g.done(name)
		f()
	})
}

func (g *Group) done(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[name]--; g.running[name] <= 0 {
		delete(g.running, name)
	}
}

// Wait waits until every goroutine started with Go has returned.
func (g *Group) Wait() { g.wg.Wait() }

// Running returns how many goroutines of each name run now: for a debug
// page or a leak check.
func (g *Group) Running() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.running)
}
