package actor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
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
	pending   uint64
}

// effector drives one effector: it holds the records its consumer delivers
// and processes them one at a time, high priority first.
//
// Records arrive through deliver (on the consumer's goroutine) into held; a
// drain goroutine runs while held is not empty and exits when it is, so an
// idle effector costs no goroutine of its own.
type effector struct {
	node *Node
	kind *kindSpec
	km   *kindMetrics
	ref  records.Ref
	key  string
	log  *slog.Logger

	// ctx is cancelled when the effector must stop for good: logic and
	// retries of the record in hand give up.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	cons     jetstream.ConsumeContext
	held     []delivery
	pending  uint64 // records on the server behind the last delivered one
	maxSeen  uint64 // highest stream sequence delivered since attach
	running  bool
	stopped  bool
	drainers sync.WaitGroup
	// nextDelivery is the consumer sequence the next delivery must have;
	// shared is set once one did not (see exclusive).
	nextDelivery uint64
	shared       bool
	// checking: a look-up of the consumer is in flight.
	checking atomic.Bool
	// seen is the highest mailbox sequence the node's wake scan saw for the
	// effector: if it stays above the state's Seq while the effector idles,
	// its consumer is stalled.
	seen atomic.Uint64
	// lastActive is when the effector was attached or last finished a record.
	lastActive time.Time

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

	// doc and rev are the state document as last written. The drain
	// goroutine owns them, except while logic runs, when the watchdog may
	// write PROCESSING; docMu keeps the two apart.
	docMu sync.Mutex
	doc   Document
	rev   uint64
}

// consumerName is the durable consumer name of ref when node drives it:
// <kind>~<id>~<node>, with the id hashed when too long for a consumer name.
// Each driver has a consumer of its own, so a node that lost an effector
// without knowing it yet can never pull records from its successor's
// consumer (and apply a record without the ones before it).
func consumerName(ref records.Ref, node string) string {
	id := ref.ID
	if len(ref.Kind)+len(id)+len(node) > 200 {
		sum := sha256.Sum256([]byte(ref.ID))
		id = "h" + hex.EncodeToString(sum[:20])
	}
	return ref.Kind + "~" + id + "~" + node
}

// deliver receives a record from the consumer.
func (e *effector) deliver(msg jetstream.Msg) {
	d := delivery{msg: msg}
	meta, err := msg.Metadata()
	if err != nil {
		e.log.Error("record without JetStream metadata; releasing it", "err", err)
		_ = msg.Nak()
		return
	}
	d.seq, d.delivered, d.pending = meta.Sequence.Stream, meta.NumDelivered, meta.NumPending
	if !e.exclusive(meta.Sequence.Consumer) {
		return
	}
	d.rec, d.err = records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
	d.rec.Subject, d.rec.Seq = msg.Subject(), d.seq
	if d.rec.ID == "" {
		d.rec.ID = "s" + strconv.FormatUint(d.seq, 10)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return // left unacknowledged; whoever drives next recreates the consumer
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
	e.held = append(e.held, d)
	e.pending = d.pending
	e.maxSeen = max(e.maxSeen, d.seq)
	if !e.running {
		e.running = true
		e.drainers.Add(1)
		go e.drain()
	}
}

// exclusive checks that the consumer delivers to this effector alone, in
// order: consumer sequences must follow one another. A gap means another
// puller took a record (a node that drove the effector before, or the
// consumer was recreated under us), and applying what follows could advance
// seq past a record this node never saw. Then the effector stops taking
// records and lets placement attach it afresh.
func (e *effector) exclusive(cseq uint64) bool {
	e.mu.Lock()
	ok := !e.shared && cseq == e.nextDelivery
	if ok {
		e.nextDelivery++
	}
	first := !ok && !e.shared
	e.shared = e.shared || !ok
	e.mu.Unlock()
	if first {
		e.log.Info("consumer shared with another puller; attaching afresh", "delivery", cseq)
		go e.node.consumerGone(e.ref, e)
	}
	return ok
}

// drain processes held records until none is left or the effector stops.
func (e *effector) drain() {
	defer e.drainers.Done()
	for {
		e.mu.Lock()
		if e.stopped || len(e.held) == 0 {
			e.running = false
			e.cancelled = nil
			e.lastActive = time.Now()
			e.mu.Unlock()
			return
		}
		i := 0
		for j, d := range e.held {
			if d.rec.Priority == records.PriorityHigh {
				i = j
				break
			}
		}
		d := e.held[i]
		e.held = append(e.held[:i], e.held[i+1:]...)
		e.mu.Unlock()
		e.process(d)
	}
}

// stop stops consuming, lets the record in hand finish for up to grace, then
// cancels it, and releases the records held for redelivery.
func (e *effector) stop(grace time.Duration) {
	e.mu.Lock()
	e.stopped = true
	held := e.held
	e.held = nil
	cons := e.cons
	e.mu.Unlock()
	if cons != nil {
		cons.Stop()
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
	// The records held stay unacknowledged: the next node to drive the
	// effector recreates its consumer from the state's seq anyway.
	_ = held
}

// errAbandon: the effector stopped while a record was in hand; the record is
// left unacknowledged for redelivery.
var errAbandon = errors.New("abandoned")

// process takes one record through the whole cycle: run logic, publish
// outputs (or the dead letter), write state, acknowledge.
func (e *effector) process(d delivery) {
	start := time.Now()
	m := e.node.metrics
	kind := e.kind.name
	if d.delivered > 1 {
		m.redelivers.WithLabelValues(kind).Inc()
	}
	for {
		if e.doc.applied(d.seq) {
			e.log.Debug("skip", "seq", d.seq, "docseq", e.doc.Seq)
			e.skip(d)
			return
		}
		state, outs, reason, failure := e.evaluate(d)
		if errors.Is(failure, errAbandon) {
			e.release(d)
			return
		}
		next := e.doc
		if reason == "" {
			if reason, failure = e.publishOutputs(state, outs); errors.Is(failure, errAbandon) {
				e.release(d)
				return
			}
			if reason == "" {
				next.State, next.Status, next.Error = state, StatusIdle, ""
			}
		}
		if reason != "" {
			if err := e.retryIO(func() error { return e.deadLetter(d, reason, failure) }); err != nil {
				e.release(d)
				return
			}
			next.Status, next.Error = StatusError, failure.Error()
			e.log.Warn("record sent to dead letters", "record", d.rec.ID, "seq", d.seq, "reason", reason, "err", failure)
		}
		if e.crashed(afterOutputs, d.seq) {
			return
		}
		next.Seq, next.Ahead = e.advance(d.seq)
		next.Updated = time.Now().UTC()
		if next.Status == StatusIdle && e.backlog() > 0 {
			next.Status = StatusProcessing
		}
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
			e.release(d)
			return
		}
		if rev == 0 { // lost the compare-and-set: someone else wrote
			m.conflicts.WithLabelValues(kind).Inc()
			if !e.reload() {
				return
			}
			continue
		}
		e.log.Debug("applied", "seq", d.seq, "newseq", next.Seq, "rev", rev, "prev", e.rev)
		e.doc, e.rev = next, rev
		if e.crashed(afterState, d.seq) {
			return
		}
		if err := d.msg.Ack(); err != nil {
			e.log.Debug("ack failed; the redelivery will be skipped", "seq", d.seq, "err", err)
		}
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

// release leaves a record the effector stopped processing unacknowledged.
// No Nak: the consumer may already belong to another driver, and a Nak would
// count as a delivery of its record there; whoever drives the effector next
// recreates the consumer from the state's seq.
func (e *effector) release(d delivery) {}

// skip acknowledges a record already applied (a redelivery). When it was
// applied ahead of its turn, its redelivery proves every record below it was
// delivered, which may let the document's Seq catch up; and a document left
// showing PROCESSING by the record's first delivery goes back to IDLE.
func (e *effector) skip(d delivery) {
	next := e.doc
	if slices.Contains(e.doc.Ahead, d.seq) {
		next.Seq, next.Ahead = e.advance(d.seq)
	}
	if next.Status == StatusProcessing && e.backlog() == 0 {
		next.Status = StatusIdle
	}
	if next.Seq != e.doc.Seq || next.Status != e.doc.Status {
		next.Updated = time.Now().UTC()
		if rev, err := e.node.states.Update(e.ctx, e.key, next, e.rev); err == nil {
			e.doc, e.rev = next, rev
		} // else: the next record's write catches up
	}
	_ = d.msg.Ack()
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
	return true
}

// reload re-reads the state document after a lost compare-and-set. It
// reports false when the effector must stop (terminated or stopping).
func (e *effector) reload() bool {
	var ent kv.Entry[Document]
	if err := e.retryIO(func() error {
		var err error
		ent, err = e.node.states.Get(e.ctx, e.key)
		return err
	}); err != nil {
		return false
	}
	e.doc, e.rev = ent.Value, ent.Revision
	if e.doc.Status == StatusTerminated {
		e.log.Info("effector terminated; stopping")
		go e.node.retire(e.ref)
		return false
	}
	return true
}

// evaluate decides what a record does: a new state and outputs, or a
// dead-letter reason with the failure. It returns errAbandon when the
// effector stopped meanwhile.
func (e *effector) evaluate(d delivery) (state []byte, outs []output, reason string, failure error) {
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
		state, outs, err := e.attempt(d)
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
			e.log.Error("logic panicked", "record", d.rec.ID, "panic", pe.Value, "stack", string(pe.Stack))
			return nil, nil, reasonPanic, err
		case errors.As(err, &payload):
			return nil, nil, reasonDecode, err
		case outcomeReason(err) != "":
			return nil, nil, outcomeReason(err), err
		case IsPermanent(err):
			return nil, nil, reasonRejected, err
		case attempt >= k.retry.Attempts:
			return nil, nil, reasonFailed, fmt.Errorf("failed %d attempts: %w", attempt, err)
		}
		e.node.metrics.retries.WithLabelValues(k.name).Inc()
		wait := k.retry.delay(attempt)
		e.log.Debug("logic failed; retrying", "record", d.rec.ID, "attempt", attempt, "in", wait, "err", err)
		_ = d.msg.InProgress()
		if !sleep(e.ctx, wait) {
			return nil, nil, "", errAbandon
		}
	}
}

// attempt runs the logic once, turning a panic into a *PanicError. While it
// runs, the node's watchdog (checkSlow) may mark the state PROCESSING and
// extend the record's ack deadline.
func (e *effector) attempt(d delivery) (state []byte, outs []output, err error) {
	ctx, cancelCause := context.WithCancelCause(e.ctx)
	defer cancelCause(nil)
	if e.kind.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.kind.timeout)
		defer cancel()
	}
	c := e.newContext(ctx, d)
	// Read the state before the watchdog may see the record in hand: from
	// then on it may write the document (PROCESSING) under docMu.
	cur := e.doc.State

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

// advance returns the document's Seq and Ahead once the record at seq is
// applied. Seq may move up to an applied record p only when every mailbox
// record below p is applied too. The consumer delivers in stream order from
// just after the document's Seq, so that holds when p has been delivered since
// attach (every record below it was delivered before it) and no record below
// p is still held unapplied. Records applied above Seq (high-priority ones that
// overtook) stay in Ahead.
func (e *effector) advance(seq uint64) (uint64, []uint64) {
	lowest := ^uint64(0)
	e.mu.Lock()
	seen := e.maxSeen
	for _, d := range e.held {
		if d.seq < lowest && d.seq != seq && !e.doc.applied(d.seq) {
			lowest = d.seq
		}
	}
	e.mu.Unlock()
	floor := e.doc.Seq
	done := e.doc.Ahead[:len(e.doc.Ahead):len(e.doc.Ahead)]
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
// in hand, held or pending on the server; 0 while it is busy.
func (e *effector) idleSince(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running || len(e.held) > 0 || e.pending > 0 || e.stopped {
		return 0
	}
	return now.Sub(e.lastActive)
}

// see notes that the wake scan saw a record at seq in the mailbox.
func (e *effector) see(seq uint64) {
	for {
		cur := e.seen.Load()
		if seq <= cur || e.seen.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// stalled reports whether the mailbox holds a record the wake scan saw and
// the effector has not applied.
func (e *effector) stalled() bool {
	seen := e.seen.Load()
	e.docMu.Lock()
	defer e.docMu.Unlock()
	return seen > e.doc.Seq && !e.doc.applied(seen)
}

// backlog is how many records wait behind the one in hand.
func (e *effector) backlog() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.held) + int(e.pending)
}

// publishNow publishes a record logic streams with Context.EmitNow.
func (e *effector) publishNow(o output) error {
	_, err := e.node.conn.JS.PublishMsg(e.ctx, o.rec.Msg(o.subject))
	return publishFailure(wrapPublish(o.subject, err))
}

// publish publishes outputs: stream subjects through JetStream (durable, and
// de-duplicated by record id), others as plain NATS messages.
func (e *effector) publish(outs []output) error {
	js, nc := e.node.conn.JS, e.node.conn.NC
	switch {
	case len(outs) == 0:
		return nil
	case len(outs) == 1 && outs[0].stream:
		_, err := js.PublishMsg(e.ctx, outs[0].rec.Msg(outs[0].subject))
		return wrapPublish(outs[0].subject, err)
	}
	var acks []jetstream.PubAckFuture
	for _, o := range outs {
		msg := o.rec.Msg(o.subject)
		if !o.stream {
			if err := nc.PublishMsg(msg); err != nil {
				return wrapPublish(o.subject, err)
			}
			continue
		}
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			return wrapPublish(o.subject, err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return wrapPublish(f.Msg().Subject, err)
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
	}
	return nil
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
	return e.node.deadLetter(e.ctx, e.ref, stored{
		stream: e.node.names.RecordsStream(), subject: d.msg.Subject(), seq: d.seq,
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
				e.log.Debug("NATS answered again", "attempts", attempt+1)
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
		e.log.Log(e.ctx, level, "NATS write failed; retrying", "err", err, "in", wait)
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
