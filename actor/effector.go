package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// slowLogic is how long logic runs on one record before the state document
// shows PROCESSING.
const slowLogic = 250 * time.Millisecond

// delivery is one record delivered to an effector, parsed once on arrival.
type delivery struct {
	msg       jetstream.Msg
	rec       records.Record
	err       error // from records.FromMsg: the record cannot be decoded
	seq       uint64
	delivered uint64
}

// effector drives one effector of a partition this node reads: it holds the
// records the partition dispatched to it and processes them one at a time (or
// several in a batch), high priority first.
//
// Records arrive through deliver (on the partition's goroutine) into held; a
// drain goroutine runs while held is not empty and exits when it is, so an
// idle effector costs no goroutine of its own, and a passive one (not in its
// partition's map) costs nothing at all.
//
// Lock order: docMu before mu (attempt's deferred reset and checkSlow take
// both in that order); partition.mu is never taken while holding either.
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

	mu       sync.Mutex // guards the fields up to docMu
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

	// doc and rev are the state document as last written; loaded says
	// whether they were read yet, absent that no document exists. The drain
	// goroutine owns them, except while logic runs, when the watchdog may
	// write PROCESSING; docMu keeps the two apart.
	docMu  sync.Mutex
	doc    Document
	rev    uint64
	loaded bool
	absent bool
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

// deliver receives a record the partition dispatched to the effector. ok is
// false when the effector stopped (passivated meanwhile): the partition then
// hands the record to a new one. overflow is true when the effector now holds
// so many records that it must read its own mailbox (see overflow.go). While
// it does, the partition's records of it are acknowledged and dropped (its
// own consumer delivers them), or parked while it leaves that mode.
func (e *effector) deliver(d delivery) (ok, overflow bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return false, false
	}
	if e.ovf != nil {
		if e.ovf.draining {
			e.ovf.parked = append(e.ovf.parked, d)
		} else {
			e.ovf.droppedMax = max(e.ovf.droppedMax, d.seq)
			_ = d.msg.Ack()
		}
		return true, false
	}
	e.holdLocked(d)
	return true, e.overflowing()
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
		e.drainers.Add(1)
		go e.drain()
	}
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
		if len(batch) == 1 {
			e.process(batch[0])
		} else {
			e.processBatch(batch)
		}
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
		return false
	}
	if corrupt != nil {
		e.logger().Error("state document is corrupt; records go to dead letters until it is reset or terminated",
			"err", corrupt, "reset", e.node.names.Control(opReset, e.ref.Kind))
		return e.refuseHeld(reasonCorruptState, fmt.Errorf("effector %s: %w (reset it with %s)", e.ref, corrupt, e.node.names.Control(opReset, e.ref.Kind)), nil)
	}
	first := !e.loaded
	e.docMu.Lock()
	e.doc, e.rev, e.loaded, e.absent = ent.Value, ent.Revision, true, ent.Revision == 0
	e.docMu.Unlock()
	if first && !e.absent && e.doc.Status != StatusTerminated {
		e.node.metrics.activations.WithLabelValues(e.ref.Kind).Inc()
	}
	if !e.absent && e.doc.Status != StatusTerminated {
		return true
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
	for i, d := range held {
		if applied != nil && applied(d.seq) {
			_ = d.msg.Ack()
			continue
		}
		if err := e.retryIO(func() error { return e.deadLetter(d, reason, why) }); err != nil {
			e.putBack(held[i:])
			e.abandonHeld()
			return false
		}
		_ = d.msg.Ack()
		e.km.dead.Inc()
		e.node.metrics.dead.WithLabelValues(e.ref.Kind, reason).Inc()
		e.logger().Warn("record sent to dead letters", "seq", d.seq, "reason", reason)
	}
	return false
}

// abandonHeld drops the records held when the effector is stopping: they
// stay unacknowledged, and whoever reads the partition next gets them again.
func (e *effector) abandonHeld() {
	e.mu.Lock()
	e.held = nil
	e.mu.Unlock()
}

// stop stops taking records, lets the record in hand finish for up to grace,
// then cancels it. The records held stay unacknowledged for whoever reads
// the partition next.
func (e *effector) stop(grace time.Duration) {
	e.mu.Lock()
	e.stopped = true
	e.held = nil
	var own jetstream.ConsumeContext
	if e.ovf != nil {
		own = e.ovf.cc
	}
	e.mu.Unlock()
	if own != nil {
		own.Stop() // the consumer stays: whoever reads the partition next reads from it
	}
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

// process takes one record through the whole cycle: run logic (retrying it
// with backoff), publish outputs (or the dead letter), write state,
// acknowledge.
func (e *effector) process(d delivery) {
	start := time.Now()
	m := e.node.metrics
	kind := e.kind.name
	if d.delivered > 1 {
		m.redelivers.WithLabelValues(kind).Inc()
	}
	for {
		if e.doc.applied(d.seq) {
			e.skip(d)
			return
		}
		state, outs, reason, failure := e.evaluate(d, e.doc.State, true)
		if errors.Is(failure, errAbandon) {
			return
		}
		next := e.doc
		if reason == "" {
			if reason, failure = e.publishOutputs(state, outs); errors.Is(failure, errAbandon) {
				return
			}
			if reason == "" {
				next.State, next.Status, next.Error = state, StatusIdle, ""
			}
		}
		if reason != "" {
			if err := e.retryIO(func() error { return e.deadLetter(d, reason, failure) }); err != nil {
				e.dropped(err)
				return
			}
			next.Status, next.Error = StatusError, failure.Error()
			e.logger().Warn("record sent to dead letters", "record", d.rec.ID, "seq", d.seq, "reason", reason, "err", failure)
		}
		if e.crashed(afterOutputs, d.seq) {
			return
		}
		next.Seq, next.Ahead = e.advance(next, d.seq)
		next.Updated = time.Now().UTC()
		if next.Status == StatusIdle && e.backlog() > 0 {
			next.Status = StatusProcessing
		}
		ok, stop := e.write(next)
		if stop {
			e.putBack([]delivery{d}) // terminated: load sends it to dead letters
			return
		}
		if !ok {
			continue // lost the compare-and-set: evaluate again on what won
		}
		if e.crashed(afterState, d.seq) || !e.emitState(d) {
			return
		}
		e.ack(d)
		if reason != "" {
			e.km.dead.Inc()
			m.dead.WithLabelValues(kind, reason).Inc()
		} else {
			e.km.ok.Inc()
		}
		e.km.duration.Observe(time.Since(start).Seconds())
		return
	}
}

// processBatch applies several held records with one state write: logic
// runs on each in order (one attempt each), the outputs and dead letters of
// all are published together, then the state document is written once with
// the last sequence, then every record is acknowledged. A crash anywhere
// re-runs the batch on redelivery; output ids make the re-run publish
// nothing twice. A record whose logic fails ends the batch before it: the
// records before it are committed and it is processed on its own, with
// retries.
func (e *effector) processBatch(batch []delivery) {
	start := time.Now()
	m := e.node.metrics
	kind := e.kind.name
	next := e.doc
	var (
		outs  []output
		acks  []delivery
		dead  []deadOutcome
		okN   int
		skips int
	)
	for i, d := range batch {
		if d.delivered > 1 {
			m.redelivers.WithLabelValues(kind).Inc()
		}
		if next.applied(d.seq) {
			if !e.restate(d) {
				return // stopping: the batch stays unacknowledged
			}
			acks = append(acks, d)
			skips++
			continue
		}
		state, o, reason, failure := e.evaluate(d, next.State, false)
		if errors.Is(failure, errAbandon) {
			return
		}
		if errors.Is(failure, errRetryAlone) {
			e.putBack(batch[i:])
			batch = batch[:i]
			e.alone = 1 // it is retried on its own, with backoff
			break
		}
		if reason != "" {
			dead = append(dead, deadOutcome{d: d, reason: reason, err: failure})
			next.Status, next.Error = StatusError, failure.Error()
		} else {
			outs = append(outs, o...)
			next.State, next.Status, next.Error = state, StatusIdle, ""
			okN++
		}
		next.Seq, next.Ahead = e.advanceWith(next, d.seq, batch[i+1:])
		acks = append(acks, d)
	}
	if len(acks) == 0 {
		return
	}
	if okN+len(dead) > 0 {
		if okN > 0 && e.stateFits(next.State) != nil {
			e.putBack(batch) // the state outgrew the server: find the record alone
			e.alone = len(batch)
			return
		}
		if err := e.retryIO(func() error { return e.publishWithDead(outs, dead) }); err != nil {
			if !errors.Is(err, errAbandon) {
				// An output or dead letter can never be published as it is:
				// take the records one at a time, where it dead-letters its
				// own record.
				e.putBack(batch)
				e.alone = len(batch)
			}
			return
		}
		for _, d := range batch {
			if e.crashed(afterOutputs, d.seq) {
				return
			}
		}
		next.Updated = time.Now().UTC()
		if next.Status == StatusIdle && e.backlog() > 0 {
			next.Status = StatusProcessing
		}
		ok, stop := e.write(next)
		if stop || !ok {
			e.putBack(batch) // evaluate again on what won, or dead letters if terminated
			return
		}
		for _, d := range batch {
			if e.crashed(afterState, d.seq) {
				return
			}
		}
		if !e.emitState(batch[len(batch)-1]) {
			return
		}
	}
	for _, d := range acks {
		e.ack(d)
	}
	for _, x := range dead {
		e.logger().Warn("record sent to dead letters", "record", x.d.rec.ID, "seq", x.d.seq, "reason", x.reason, "err", x.err)
		e.km.dead.Inc()
		m.dead.WithLabelValues(kind, x.reason).Inc()
	}
	e.km.ok.Add(float64(okN))
	e.km.duplicate.Add(float64(skips))
	per := time.Since(start).Seconds() / float64(len(acks))
	for range acks {
		e.km.duration.Observe(per)
	}
}

// deadOutcome is a record of a batch bound for dead letters.
type deadOutcome struct {
	d      delivery
	reason string
	err    error
}

// publishWithDead publishes a batch's outputs and dead letters.
func (e *effector) publishWithDead(outs []output, dead []deadOutcome) error {
	for _, x := range dead {
		if err := e.deadLetter(x.d, x.reason, x.err); err != nil {
			return err
		}
	}
	return e.publish(outs)
}

// write compare-and-sets the state document. ok reports whether it was
// written; stop, that the effector must stop (terminated, or stopping).
func (e *effector) write(next Document) (ok, stop bool) {
	var rev uint64
	err := e.retryIO(func() error {
		var err error
		rev, err = e.node.states.Update(e.ctx, e.key, next, e.rev)
		if errors.Is(err, kv.ErrConflict) {
			return nil
		}
		return err
	})
	if err != nil {
		return false, true
	}
	if rev == 0 { // lost the compare-and-set: someone else wrote
		e.node.metrics.conflicts.WithLabelValues(e.kind.name).Inc()
		return false, !e.reload()
	}
	e.docMu.Lock()
	e.doc, e.rev = next, rev
	e.docMu.Unlock()
	return true, false
}

// ack acknowledges a record to the partition's consumer.
func (e *effector) ack(d delivery) {
	if err := d.msg.Ack(); err != nil {
		e.logger().Debug("ack failed; the redelivery will be skipped", "seq", d.seq, "err", err)
	}
}

// skip acknowledges a record already applied (a redelivery). When it was
// applied ahead of its turn, its redelivery proves every record below it was
// delivered, which may let the document's Seq catch up; and a document left
// showing PROCESSING by the record's first delivery goes back to IDLE.
func (e *effector) skip(d delivery) {
	next := e.doc
	if slices.Contains(e.doc.Ahead, d.seq) {
		next.Seq, next.Ahead = e.advance(next, d.seq)
	}
	if next.Status == StatusProcessing && e.backlog() == 0 {
		next.Status = StatusIdle
	}
	if next.Seq != e.doc.Seq || next.Status != e.doc.Status {
		next.Updated = time.Now().UTC()
		if rev, err := e.node.states.Update(e.ctx, e.key, next, e.rev); err == nil {
			e.docMu.Lock()
			e.doc, e.rev = next, rev
			e.docMu.Unlock()
		} // else: the next record's write catches up
	}
	if !e.restate(d) {
		return // stopping: d stays unacknowledged
	}
	e.ack(d)
	e.km.duplicate.Inc()
}

// crashed reports whether a test made the node die at point; the effector
// then stops dead, leaving the record in hand unacknowledged.
func (e *effector) crashed(point crashPoint, seq uint64) bool {
	if e.node.crash == nil || !e.node.crash(point, e.ref, seq) {
		return false
	}
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.cancel()
	// As if the node died: nobody may apply the effector's later records
	// before this one, so its partition is read again from the ack floor.
	e.part.fail()
	return true
}

// dropped handles a record the effector could not finish and that stays
// unacknowledged although the effector goes on (a write that can never
// succeed): its later records must not be applied before it comes again,
// so the partition is read again from its ack floor, in order.
func (e *effector) dropped(err error) {
	if e.ctx.Err() != nil || errors.Is(err, errAbandon) {
		return // stopping: the next reader gets it again anyway
	}
	e.logger().Error("a record could not be finished; reading its partition again from the ack floor", "err", err)
	e.part.fail()
}

// reload re-reads the state document after a lost compare-and-set. It
// reports false when the effector must stop (terminated or stopping).
func (e *effector) reload() bool {
	var ent kv.Entry[Document]
	if err := e.retryIO(func() error {
		var err error
		ent, err = e.node.states.Get(e.ctx, e.key)
		if errors.Is(err, ErrCorruptState) {
			e.docMu.Lock()
			e.loaded = false // load reads it again and dead-letters the records
			e.docMu.Unlock()
			return nil
		}
		return err
	}); err != nil || !e.loaded {
		return false
	}
	e.docMu.Lock()
	e.doc, e.rev = ent.Value, ent.Revision
	e.docMu.Unlock()
	if e.doc.Status == StatusTerminated {
		e.logger().Info("effector terminated; its records go to dead letters")
		return false
	}
	return true
}

// errRetryAlone: in a batch, the logic failed on a record in a way a retry
// may fix; it is processed again on its own, with retries.
var errRetryAlone = errors.New("retry alone")

// evaluate decides what a record does on state cur: a new state and
// outputs, or a dead-letter reason with the failure. It returns errAbandon
// when the effector stopped meanwhile. Without retry, a failure that a retry
// may fix returns errRetryAlone after one attempt.
func (e *effector) evaluate(d delivery, cur []byte, retry bool) (state []byte, outs []output, reason string, failure error) {
	k := e.kind
	if reason, failure := e.screen(d); reason != "" {
		return nil, nil, reason, failure
	}
	switch {
	case d.err != nil:
		return nil, nil, reasonDecode, d.err
	case !k.accepts(d.rec.ContentType):
		return nil, nil, reasonContentType, fmt.Errorf("kind %s does not accept payloads of type %s (accepts %s)", k.name, d.rec.ContentType, strings.Join(k.accept, ", "))
	case k.maxPayload > 0 && len(d.rec.Payload) > k.maxPayload:
		return nil, nil, reasonOversize, fmt.Errorf("payload of %d bytes exceeds the %d bytes kind %s accepts", len(d.rec.Payload), k.maxPayload, k.name)
	case d.delivered > uint64(k.maxDeliveries):
		return nil, nil, reasonRedelivered, fmt.Errorf("delivered %d times without completing (limit %d): the record may crash its node", d.delivered, k.maxDeliveries)
	}
	for attempt := 1; ; attempt++ {
		state, outs, err := e.attempt(d, cur)
		if err == nil {
			return state, outs, "", nil
		}
		if e.ctx.Err() != nil {
			return nil, nil, "", errAbandon
		}
		var pe *PanicError
		var payload *records.PayloadError
		switch {
		case errors.Is(err, ErrCancelled):
			return nil, nil, reasonCancelled, err
		case errors.As(err, &pe):
			e.logger().Error("logic panicked", "record", d.rec.ID, "panic", pe.Value, "stack", string(pe.Stack))
			return nil, nil, reasonPanic, err
		case errors.As(err, &payload):
			return nil, nil, reasonDecode, err
		case outcomeReason(err) != "":
			return nil, nil, outcomeReason(err), err
		case IsPermanent(err):
			return nil, nil, reasonRejected, err
		case attempt >= k.retry.Attempts:
			return nil, nil, reasonFailed, fmt.Errorf("failed %d attempts: %w", attempt, err)
		case !retry:
			// In a batch: the record is retried on its own, with backoff
			// (one attempt more than Retry.Attempts in all, at most).
			e.node.metrics.retries.WithLabelValues(k.name).Inc()
			return nil, nil, "", errRetryAlone
		}
		e.node.metrics.retries.WithLabelValues(k.name).Inc()
		wait := k.retry.Delay(attempt)
		e.logger().Debug("logic failed; retrying", "record", d.rec.ID, "attempt", attempt, "in", wait, "err", err)
		_ = d.msg.InProgress()
		if !sleep(e.ctx, wait) {
			return nil, nil, "", errAbandon
		}
	}
}

// attempt runs the logic once, turning a panic into a *PanicError. While it
// runs, the node's watchdog (checkSlow) may mark the state PROCESSING and
// extend the record's ack deadline.
func (e *effector) attempt(d delivery, cur []byte) (state []byte, outs []output, err error) {
	ctx, cancelCause := context.WithCancelCause(e.ctx)
	defer cancelCause(nil)
	if e.kind.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.kind.timeout)
		defer cancel()
	}
	c := e.newContext(ctx, d)

	now := time.Now()
	e.mu.Lock()
	e.handSince, e.handMsg, e.marked, e.lastProgress = now, d.msg, false, now
	e.handProcess, e.handCancel = d.rec.Process, cancelCause
	if upTo, ok := e.cancelled[d.rec.Process]; ok && d.rec.Process != "" && d.seq < upTo {
		cancelCause(ErrCancelled)
	}
	e.mu.Unlock()
	defer func() {
		e.docMu.Lock() // waits for a PROCESSING write in flight
		e.mu.Lock()
		e.handSince, e.handMsg = time.Time{}, nil
		e.handProcess, e.handCancel = "", nil
		e.mu.Unlock()
		e.docMu.Unlock()
	}()
	defer func() {
		if err != nil && errors.Is(context.Cause(ctx), ErrCancelled) && !errors.Is(err, ErrCancelled) {
			err = fmt.Errorf("%w: %w", ErrCancelled, err)
		}
	}()

	defer func() {
		if v := recover(); v != nil {
			state, outs, err = nil, nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	state, err = e.kind.run(c, cur)
	if err = c.outcome(err); err != nil {
		return nil, nil, err
	}
	return state, c.outs, nil
}

// checkSlow is the watchdog's look at the effector: when logic has run on a
// record for more than slowLogic, the state shows PROCESSING, and every third
// of the ack wait the server is told the record is still in progress.
func (e *effector) checkSlow(now time.Time) {
	e.extendHeld(now)
	e.mu.Lock()
	since, msg, marked := e.handSince, e.handMsg, e.marked
	slow := !since.IsZero() && now.Sub(since) >= slowLogic
	extend := slow && now.Sub(e.lastProgress) >= e.kind.ackWait/3
	if extend {
		e.lastProgress = now
	}
	e.mu.Unlock()
	if !slow {
		return
	}
	if extend {
		_ = msg.InProgress()
	}
	if marked {
		return
	}
	go func() {
		e.docMu.Lock()
		defer e.docMu.Unlock()
		e.mu.Lock()
		still := e.handSince.Equal(since) && !e.marked
		e.marked = e.marked || still
		e.mu.Unlock()
		if still {
			e.markProcessing()
		}
	}()
}

// extendHeld tells the server, every third of the ack wait, that the
// records held behind the one in hand are still in progress, so it does not
// redeliver them while they wait their turn.
func (e *effector) extendHeld(now time.Time) {
	e.mu.Lock()
	if len(e.held) == 0 || now.Sub(e.heldProgress) < e.kind.ackWait/3 {
		e.mu.Unlock()
		return
	}
	e.heldProgress = now
	msgs := make([]jetstream.Msg, len(e.held))
	for i, d := range e.held {
		msgs[i] = d.msg
	}
	e.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// markProcessing shows PROCESSING in the state document while slow logic runs.
func (e *effector) markProcessing() {
	next := e.doc
	next.Status, next.Updated = StatusProcessing, time.Now().UTC()
	rev, err := e.node.states.Update(e.ctx, e.key, next, e.rev)
	if err != nil {
		return // the final write will find out
	}
	e.doc, e.rev = next, rev
}

// advance returns doc's Seq and Ahead once the record at seq is applied,
// with the records held as they are.
func (e *effector) advance(doc Document, seq uint64) (uint64, []uint64) {
	return e.advanceWith(doc, seq, nil)
}

// advanceWith returns doc's Seq and Ahead once the record at seq is applied.
// Seq may move up to an applied record p only when every mailbox record
// below p is applied too. The partition delivers an effector's records in
// stream order from above its ack floor, which is at or below the
// document's Seq, so that holds when p has been delivered since the
// effector was loaded (every record below it was delivered before it) and
// no record below p is still held or taken (pending, in a batch) unapplied.
// Records applied above Seq (high-priority ones that overtook) stay in
// Ahead.
func (e *effector) advanceWith(doc Document, seq uint64, pending []delivery) (uint64, []uint64) {
	lowest := ^uint64(0)
	e.mu.Lock()
	seen := e.maxSeen
	for _, d := range e.held {
		if d.seq < lowest && d.seq != seq && !doc.applied(d.seq) {
			lowest = d.seq
		}
	}
	e.mu.Unlock()
	for _, d := range pending {
		if d.seq < lowest && d.seq != seq && !doc.applied(d.seq) {
			lowest = d.seq
		}
	}
	floor := doc.Seq
	done := doc.Ahead[:len(doc.Ahead):len(doc.Ahead)]
	if !slices.Contains(done, seq) {
		done = append(done, seq)
	}
	for _, s := range done {
		if s < lowest && s <= seen && s > floor {
			floor = s
		}
	}
	var ahead []uint64
	for _, s := range done {
		if s > floor {
			ahead = append(ahead, s)
		}
	}
	return floor, ahead
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

// publishNow publishes a record logic streams with Context.EmitNow.
func (e *effector) publishNow(o output) error {
	_, err := e.node.js.PublishMsg(e.ctx, o.rec.Msg(o.subject))
	return publishFailure(wrapPublish(o.subject, err))
}

// publish publishes outputs: stream subjects through JetStream (durable, and
// de-duplicated by record id), others as plain NATS messages. Several are
// published asynchronously on the node's own JetStream context, and all
// their acknowledgements awaited; when its window of unacknowledged
// publishes is full, publish waits for the ones in flight before going on.
func (e *effector) publish(outs []output) error {
	js, nc := e.node.js, e.node.conn.NC
	switch {
	case len(outs) == 0:
		return nil
	case len(outs) == 1 && outs[0].stream:
		_, err := js.PublishMsg(e.ctx, outs[0].rec.Msg(outs[0].subject))
		return wrapPublish(outs[0].subject, err)
	}
	var acks []jetstream.PubAckFuture
	wait := func() error {
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return wrapPublish(f.Msg().Subject, err)
			case <-e.ctx.Done():
				return e.ctx.Err()
			}
		}
		acks = acks[:0]
		return nil
	}
	for _, o := range outs {
		msg := o.rec.Msg(o.subject)
		if !o.stream {
			if err := nc.PublishMsg(msg); err != nil {
				return wrapPublish(o.subject, err)
			}
			continue
		}
		f, err := js.PublishMsgAsync(msg)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			if err := wait(); err != nil {
				return err
			}
			f, err = js.PublishMsgAsync(msg)
		}
		if err != nil {
			return wrapPublish(o.subject, err)
		}
		acks = append(acks, f)
	}
	return wait()
}

func wrapPublish(subject string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("publish to %s: %w", subject, err)
}

// deadLetter publishes the record to the effector's dead letters with the
// reason in EA-Error and EA-Dead-Reason (see Node.deadLetter).
func (e *effector) deadLetter(d delivery, reason string, failure error) error {
	return e.node.deadLetter(e.ctx, e.node.names.Dead(e.ref), stored{
		stream: e.node.names.MailboxStream(), subject: d.msg.Subject(), seq: d.seq,
		header: d.msg.Headers(), data: d.msg.Data(),
	}, reason, failure)
}

// retryIO runs op until it succeeds, backing off while NATS is unreachable.
// It gives up when the effector stops, returning errAbandon: the record in
// hand stays unacknowledged and is redelivered later; and at once, returning
// the error, when the write can never succeed (bus.Unpublishable).
//
// A timeout means a server too busy to answer in time rather than one out of
// reach: retrying at once would only add to its load, so the first wait is
// longer. The first failure of an operation is logged as a warning, later
// ones at debug level.
func (e *effector) retryIO(op func() error) error {
	wait := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil {
			if attempt > 0 {
				e.logger().Debug("NATS answered again", "attempts", attempt+1)
			}
			return nil
		}
		if e.ctx.Err() != nil {
			return errAbandon
		}
		if unpublishable(err) {
			return err // can never succeed: not a NATS outage
		}
		if attempt == 0 && isTimeout(err) {
			wait = 250 * time.Millisecond
		}
		level := slog.LevelWarn
		if attempt > 0 {
			level = slog.LevelDebug
		}
		e.logger().Log(e.ctx, level, "NATS write failed; retrying", "err", err, "in", wait)
		if !sleep(e.ctx, wait) {
			return errAbandon
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// isTimeout reports whether err is a request that got no answer in time.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// sleep waits for d or until ctx ends, reporting whether it waited fully.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
