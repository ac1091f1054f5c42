package actor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// Terminating interrupts the run in progress. Before terminate writes the
// end record, it asks the node that reads the effector's partition (the
// lease holder) to stop working on it. That node reads the document and,
// finding it TERMINATED (a request alone interrupts nothing), cancels the
// context of the logic in hand with a cause matching both [ErrCancelled]
// and [ErrTerminated], and answers once the effector has stopped
// processing (its record in hand dead-lettered with reason "cancelled", the
// records held behind it with reason "terminated"), or after
// [interruptWait]. So logic that honours its context — a hosted graph
// stops at its next node boundary, an LLM stream at once — publishes
// nothing after the end record: neither what it streams (EmitNow) nor its
// outputs, which a cancelled attempt does not have.
//
// Limits: logic that ignores its context for longer than interruptWait can
// still publish after the end record, and a node that does not answer
// (down, or mid hand-over) is not waited for. An attempt that completed
// just before the cancellation arrived has its outputs published (before
// the end record, as terminate waits), although its state write then fails
// on the TERMINATED document and the record goes to dead letters (reason
// terminated): as for any record that races a terminate.

// opInterrupt is the node-only control operation that stops the run of an
// effector being terminated: <prefix>.ctl.node.<node>.interrupt.<kind>,
// body the effector's id.
const opInterrupt = "interrupt"

// interruptWait bounds how long terminate waits for the node running the
// effector to stop working on it.
const interruptWait = 5 * time.Second

// errTerminatedRun is the cause of the context of logic interrupted by a
// terminate: a cancellation (the record goes to dead letters at once, no
// retries) because the effector was terminated.
var errTerminatedRun = fmt.Errorf("%w: %w", ErrCancelled, ErrTerminated)

// interruptRun stops the run in progress of ref, just marked TERMINATED,
// on the node that reads its partition, and waits for it (see above).
func (n *Node) interruptRun(ctx context.Context, ref records.Ref) {
	p := n.place.Load()
	if p == nil {
		return
	}
	s := slot{ref.Kind, n.names.Partition(ref)}
	p.mu.Lock()
	owner := p.leases[s].node
	p.mu.Unlock()
	switch owner {
	case "":
		return
	case n.opts.NodeID:
		n.interruptHere(ctx, ref)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, interruptWait+time.Second)
	defer cancel()
	_, err := n.conn.NATS().RequestWithContext(ctx, n.names.NodeControl(owner, opInterrupt, ref.Kind), []byte(ref.ID))
	if err != nil && !errors.Is(err, nats.ErrNoResponders) {
		n.log.Warn("terminate: the node running the effector did not confirm it stopped", "effector", ref.String(), "node", owner, "err", err)
	}
}

// onInterrupt answers an interrupt request once the effector it names has
// stopped here (or was not running).
func (n *Node) onInterrupt(kind string, m *nats.Msg) {
	ref := records.Ref{Kind: kind, ID: string(m.Data)}
	if ref.Validate() != nil {
		_ = m.Respond(nil)
		return
	}
	ctx, cancel := context.WithTimeout(n.runCtx, interruptWait)
	defer cancel()
	n.interruptHere(ctx, ref)
	_ = m.Respond(nil)
}

// interruptHere cancels the logic running on ref's record in hand, if ref
// is loaded here, and waits until the effector stopped processing, for up
// to interruptWait. The effector reads its document again before its next
// record (stale), finds it TERMINATED, and dead-letters what it holds.
func (n *Node) interruptHere(ctx context.Context, ref records.Ref) {
	e := n.loaded(ref)
	if e == nil {
		return
	}
	// Only a terminated effector is interrupted: anyone who may send
	// control requests can reach the node subject, and must not be able to
	// cancel the logic of a live effector with it.
	if ent, err := n.states.Get(ctx, n.names.StateKey(ref)); err != nil || ent.Value.Status != StatusTerminated {
		return
	}
	e.stale.Store(true)
	busy := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.handCancel != nil {
			e.handCancel(errTerminatedRun)
		}
		return e.running && !e.stopped
	}
	if !busy() {
		return
	}
	// The drain goroutine says nothing when it is done: poll, briefly.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(interruptWait)
	defer deadline.Stop()
	for busy() {
		select {
		case <-tick.C:
		case <-deadline.C:
			n.log.Warn("terminate: the effector's logic did not stop in time; it may still publish", "effector", ref.String(), "waited", interruptWait)
			return
		case <-ctx.Done():
			return
		}
	}
}
