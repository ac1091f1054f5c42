package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// effector drives one effector of a partition this node reads: it holds the
// records the partition dispatched to it and processes them one at a time (or
// several in a batch), high priority first.
//
// Records arrive through deliver (on the partition's goroutine) into held; a
// drain goroutine runs while held is not empty and exits when it is, so an
// idle effector costs no goroutine of its own, and a passive one (not in its
// partition's map) costs nothing at all.
//
// Lock order: mu before Node.busy's; partition.mu is never taken while
// holding mu.
//
// Goroutines: the drain goroutine (started by holdLocked), the watchdog's
// PROCESSING write (started by checkSlow) and the check of an own consumer
// (checkOwn) are counted in drainers, which stop waits for.
type effector struct {
	node *Node
	part *partition
	kind *kindSpec
	km   *kindMetrics
	ref  records.Ref
	key  string

	// ctx is cancelled when the effector must stop for good: logic and
	// retries of the record in hand give up.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // guards the fields up to doc
	held     []delivery
	maxSeen  uint64 // highest stream sequence delivered since the effector was loaded
	running  bool
	stopped  bool
	drainers sync.WaitGroup
	// lastActive is when the effector was loaded or last finished a record.
	lastActive time.Time
	// progress is when the drain goroutine last started or finished a batch
	// (the stall watch reads it, see stall.go).
	progress time.Time
	// heldSince is when the records held were last told to the server to be
	// in progress (the watchdog extends their ack deadline).
	heldProgress time.Time

	// While logic runs (under mu): when it started, the record's message,
	// whether the state shows PROCESSING for it and when the ack deadline
	// was last extended. The node's watchdog reads them.
	handSince    time.Time
	handMsg      jetstream.Msg
	marked       bool
	lastProgress time.Time
	// The record in hand's process and a way to cancel its logic, and the
	// processes cancelled by cancel records seen (process → the cancel
	// record's sequence: records of that process below it start cancelled).
	handProcess string
	handCancel  context.CancelCauseFunc
	cancelled   map[string]uint64
	// marking is closed when the watchdog's PROCESSING write for the record
	// in hand ends; nil when none was started.
	marking chan struct{}

	// doc and rev are the state document as last written; loaded says
	// whether they were read yet, absent that no document exists. The drain
	// goroutine owns them, except while logic runs, when the watchdog's
	// PROCESSING write may take them over (see marking): the drain
	// goroutine waits for that write to end before it reads them again.
	doc    Document
	rev    uint64
	loaded bool
	absent bool
	// found is the document as last read from the server (not as written
	// here): a redelivered record it shows applied was applied by an
	// earlier reader of the partition (another node, before a lease
	// moved), one applied only since by this effector is its own
	// duplicate (ea_records_processed_total's already_applied and
	// duplicate). Owned like doc.
	found Document
	// stale: the document changed behind the effector's back (a retire
	// notice): read it again before the next record.
	stale atomic.Bool
	// ovf is set while the effector reads its own mailbox (overflow.go);
	// guarded by mu.
	ovf *overflow
	// alone is how many records the drain goroutine takes one at a time
	// before batching again (after a batch that could not be published).
	alone int
}

// logger returns a logger naming the effector. It is made when needed, not
// kept: ten thousand loaded effectors should not hold ten thousand loggers.
func (e *effector) logger() *slog.Logger {
	return e.node.log.With("effector", e.ref.String())
}

// load reads the state document the first time the effector runs. It
// reports whether records can be processed: when the effector was never
// created or is terminated, the records held go to dead letters here and it
// reports false.
func (e *effector) load() bool {
	if e.loaded && !e.absent && e.doc.Status != StatusTerminated && !e.stale.Swap(false) {
		return true
	}
	var ent kv.Entry[Document]
	var corrupt error
	err := e.retryIO(func() error {
		var err error
		ent, err = e.node.loadState(e.ctx, e.ref)
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if errors.Is(err, ErrCorruptState) {
			corrupt = err // retrying cannot fix it: an operator resets it
			return nil
		}
		return err
	})
	if err != nil {
		e.abandonHeld()
		e.dropped(err) // not stopping: the records held must come again before later ones
		return false
	}
	if corrupt != nil {
		e.logger().Error("state document is corrupt; records go to dead letters until it is reset or terminated",
			"err", corrupt, "reset", e.node.names.Control(opReset, e.ref.Kind))
		return e.refuseHeld(reasonCorruptState, fmt.Errorf("effector %s: %w (reset it with %s)", e.ref, corrupt, e.node.names.Control(opReset, e.ref.Kind)), nil)
	}
	first := !e.loaded
	e.doc, e.rev, e.loaded, e.absent = ent.Value, ent.Revision, true, ent.Revision == 0
	e.found = ent.Value
	if first && !e.absent && e.doc.Status != StatusTerminated {
		e.node.metrics.activations.WithLabelValues(e.ref.Kind).Inc()
	}
	if !e.absent && e.doc.Status != StatusTerminated {
		return e.fitVersion()
	}
	reason, why := reasonNoEffector, fmt.Errorf("effector %s was never created; create it before sending to it", e.ref)
	applied := func(uint64) bool { return false }
	if !e.absent {
		reason, why = reasonTerminated, fmt.Errorf("effector %s is terminated", e.ref)
		applied = e.doc.applied
	}
	return e.refuseHeld(reason, why, applied)
}

// refuseHeld sends the records held to dead letters with reason and why
// (acknowledging those applied says were applied; nil for none) and reports
// false, or abandons them when the effector stops meanwhile.
func (e *effector) refuseHeld(reason string, why error, applied func(uint64) bool) bool {
	e.mu.Lock()
	held := e.held
	e.held = nil
	e.mu.Unlock()
	for _, d := range held {
		if applied != nil && applied(d.seq) {
			_ = d.msg.Ack()
			continue
		}
		if err := e.retryIO(func() error { return e.deadLetter(d, reason, why) }); err != nil {
			e.abandonHeld()
			e.dropped(err)
			return false
		}
		_ = d.msg.Ack()
		e.km.dead.Inc()
		e.node.metrics.dead.WithLabelValues(e.ref.Kind, reason).Inc()
		e.logger().Warn("record sent to dead letters", "seq", d.seq, "reason", reason)
	}
	return false
}

// stop stops taking records, lets the record in hand finish for up to grace,
// then cancels it. The records held stay unacknowledged for whoever reads
// the partition next.
func (e *effector) stop(grace time.Duration) {
	e.halt()
	done := make(chan struct{})
	go func() { e.drainers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		e.cancel()
		<-done
	}
	e.cancel()
}

// errAbandon: the effector stopped while a record was in hand; the record is
// left unacknowledged for redelivery.
var errAbandon = errors.New("abandoned")

// crashed reports whether a test made the node die at point; the effector
// then stops dead, leaving the record in hand unacknowledged.
func (e *effector) crashed(point crashPoint, seq uint64) bool {
	if e.node.crash == nil || !e.node.crash(point, e.ref, seq) {
		return false
	}
	// As if the node died: nobody may apply the effector's later records
	// before this one.
	e.giveUp()
	return true
}

// giveUp stops the effector where it is, its records in hand and held left
// unacknowledged, and has its partition read again from the ack floor:
// given up first, so that it loads no other effector for the id meanwhile,
// which could apply later records before them (advanceWith).
func (e *effector) giveUp() {
	e.part.fail()
	e.halt()
	e.cancel()
}

// halt marks the effector stopped, drops what it holds (unacknowledged, for
// whoever reads next) and stops reading its own consumer, if it has one (the
// consumer stays: whoever reads the partition next reads from it). Every
// way an effector stops goes through it: a stopped effector may be
// forgotten by its partition at its next delivery (see partition.deliver),
// and a reading of its own left running would then pull on for nobody,
// keeping the consumer's pin and its records unacknowledged from the next
// reader (TestCrash stalled on that: the crashed node's reading kept the pin
// after the node stopped).
func (e *effector) halt() {
	e.mu.Lock()
	e.stopped = true
	e.held = nil
	var own jetstream.ConsumeContext
	if e.ovf != nil {
		own = e.ovf.cc
	}
	e.mu.Unlock()
	if own != nil {
		own.Stop()
	}
}

// dropped handles a record the effector could not finish and that stays
// unacknowledged (a write that can never succeed): its later records must
// not be applied before it comes again, so the partition is read again from
// its ack floor, in order, and the effector stops here: it would otherwise
// go on with the records it holds or is handed meanwhile and move its seq
// past the one it dropped (advanceWith), which would then be skipped.
func (e *effector) dropped(err error) {
	if e.ctx.Err() != nil || errors.Is(err, errAbandon) {
		return // stopping: the next reader gets it again anyway
	}
	e.logger().Error("a record could not be finished; reading its partition again from the ack floor", "err", err)
	e.giveUp()
}

// reload re-reads the state document after a lost compare-and-set. It
// reports false when the effector must stop (terminated or stopping).
func (e *effector) reload() bool {
	var ent kv.Entry[Document]
	if err := e.retryIO(func() error {
		var err error
		ent, err = e.node.states.Get(e.ctx, e.key)
		if errors.Is(err, ErrCorruptState) {
			e.loaded = false // load reads it again and dead-letters the records
			return nil
		}
		return err
	}); err != nil || !e.loaded {
		return false
	}
	e.doc, e.rev, e.found = ent.Value, ent.Revision, ent.Value
	if e.doc.Status == StatusTerminated {
		e.logger().Info("effector terminated; its records go to dead letters")
		return false
	}
	if e.doc.StateVersion() != e.kind.versions.version {
		e.stale.Store(true) // written at another state version: load upgrades or refuses it
		return false
	}
	return true
}
