package core

import (
	"context"
	"slices"
	"sync"
)

// Approvals answers tool-call approvals from Go: its Ask method is an
// [Asker] that blocks until [Approvals.Answer] is called with the
// approval's id (or ctx ends). Watch what waits with Pending or Next. Safe
// for concurrent use; the zero value is not usable, use NewApprovals.
type Approvals struct {
	mu      sync.Mutex
	pending map[string]*waiting
	order   []string
	arrived chan struct{} // closed and replaced when an approval arrives
}

type waiting struct {
	a      Approval
	answer chan Decision
}

// NewApprovals returns an empty set of pending approvals.
func NewApprovals() *Approvals {
	return &Approvals{pending: map[string]*waiting{}, arrived: make(chan struct{})}
}

// Ask waits for the answer to a. It is an [Asker]. An approval whose id is
// already waiting is a CodeInvalid error.
func (p *Approvals) Ask(ctx context.Context, a Approval) (Decision, error) {
	w := &waiting{a: a, answer: make(chan Decision, 1)}
	p.mu.Lock()
	if _, dup := p.pending[a.ID]; dup {
		p.mu.Unlock()
		return Decision{}, Errorf(CodeInvalid, "approvals.ask", "approval %q is already waiting", a.ID)
	}
	p.pending[a.ID] = w
	p.order = append(p.order, a.ID)
	close(p.arrived)
	p.arrived = make(chan struct{})
	p.mu.Unlock()
	defer p.remove(a.ID)
	select {
	case d := <-w.answer:
		return d, nil
	case <-ctx.Done():
		return Decision{}, E(CodeCancelled, "approvals.ask", context.Cause(ctx))
	}
}

func (p *Approvals) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, id)
	p.order = slices.DeleteFunc(p.order, func(x string) bool { return x == id })
}

// Answer answers approval id. An id that is not waiting is a CodeNotFound
// error.
func (p *Approvals) Answer(id string, d Decision) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.pending[id]
	if !ok {
		return Errorf(CodeNotFound, "approvals.answer", "no approval %q is waiting", id)
	}
	delete(p.pending, id)
	p.order = slices.DeleteFunc(p.order, func(x string) bool { return x == id })
	w.answer <- d
	return nil
}

// Pending returns the approvals waiting, oldest first.
func (p *Approvals) Pending() []Approval {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Approval, 0, len(p.order))
	for _, id := range p.order {
		out = append(out, p.pending[id].a)
	}
	return out
}

// Next returns the oldest approval waiting, waiting for one if there is
// none, or ctx's error (CodeCancelled).
func (p *Approvals) Next(ctx context.Context) (Approval, error) {
	for {
		p.mu.Lock()
		if len(p.order) > 0 {
			a := p.pending[p.order[0]].a
			p.mu.Unlock()
			return a, nil
		}
		arrived := p.arrived
		p.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return Approval{}, E(CodeCancelled, "approvals.next", context.Cause(ctx))
		}
	}
}
