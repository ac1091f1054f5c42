package actor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go/jetstream"
)

// process applies records taken together, one or a batch, with one state
// write: logic runs on each in order, the outputs and dead letters of all
// are published together, then the state document is written once with the
// last sequence, then every record is acknowledged:
//
//	logic → outputs and dead letters → crash point → compare-and-set → crash point → ack
//
// A crash anywhere re-runs the records on redelivery; output ids make the
// re-run publish nothing twice.
//
// A record on its own is the case a batch falls back on. Its logic is
// retried in place, with backoff; a new state or an output that can never
// be written sends it to dead letters; a lost compare-and-set evaluates it
// again on what won. In a batch, a record whose logic fails ends the batch
// before it (the records before it are committed) and is taken again on
// its own; so are all the batch's records when its outputs or state cannot
// be written, or its compare-and-set is lost.
//
// Batches are pipelined, two deep: prev, when not nil, is the batch before
// this one, its logic run and its outputs on their way but its state not
// yet written. This batch's logic runs on prev's new state; then prev's
// outputs are awaited (stored), this batch's are published, and prev is
// finished (its state written, its records acknowledged) while they are
// stored; this batch is returned unfinished for the next call, or for the
// drain goroutine to finish when nothing more is held. So the server
// stores one batch's outputs while the node runs the next batch's logic
// and writes the state of the one before, and each record keeps its order
// of steps above. No output of a batch is sent before every output of the
// batch before it is stored: one lost to a stream leader that stepped down
// and sent again is never stored after a later one. When prev cannot be
// finished, this batch, built on it, is put back behind it and nothing is
// returned. A record alone, and a batch with dead letters or records
// already applied, finish prev first and are applied as before.
func (e *effector) process(batch []delivery, prev *commitment) *commitment {
	start := time.Now()
	m := e.node.metrics
	kind := e.kind.name
	alone := len(batch) == 1
	for _, d := range batch {
		if d.delivered > 1 {
			m.redelivers.WithLabelValues(kind).Inc()
		}
	}
	// settle finishes prev, if any, before this batch is applied on the
	// document as written; false: it could not be, and batch is put back
	// behind it.
	settle := func() bool {
		if prev == nil {
			return true
		}
		ok := e.finish(prev, batch)
		prev = nil
		return ok
	}
	if alone && !settle() {
		return nil
	}
	for { // again only for a record alone that lost the compare-and-set
		if alone && e.doc.applied(batch[0].seq) {
			e.skip(batch[0])
			return nil
		}
		next := e.doc
		if prev != nil {
			next = prev.next
		}
		var (
			outs  []output
			acked int // batch[:acked] are acknowledged once written
			dead  []deadOutcome
			okN   int
		)
		for i, d := range batch {
			if next.applied(d.seq) { // in a batch: a redelivery
				if !settle() { // restate reads the document as written
					return nil
				}
				if !e.restate(d) {
					return nil // stopping: the batch stays unacknowledged
				}
				acked++
				e.countSkip(d.seq)
				continue
			}
			state, o, reason, failure := e.evaluate(d, next.State, alone)
			if errors.Is(failure, errAbandon) {
				return nil
			}
			if errors.Is(failure, errRetryAlone) {
				e.putBack(batch[i:])
				batch = batch[:i]
				e.alone = 1 // it is retried on its own, with backoff
				break
			}
			if reason == "" && alone {
				if err := e.stateFits(state); err != nil {
					reason, failure = reasonStateTooLarge, err
				}
			}
			if reason != "" {
				dead = append(dead, deadOutcome{d: d, reason: reason, err: failure})
				next.Status, next.Error = StatusError, failure.Error()
			} else {
				if outs == nil {
					outs = o[:len(o):len(o)] // the context's own: no copy, and clipped
				} else {
					outs = append(outs, o...)
				}
				next.State, next.Status, next.Error = state, StatusIdle, ""
				okN++
			}
			next.Seq, next.Ahead = e.advanceWith(next, d.seq, batch[i+1:])
			acked++
		}
		acks := batch[:acked] // every record taken up to where the batch ended
		if len(acks) == 0 {
			return prev
		}
		c := &commitment{acks: acks, next: next, outs: outs, okN: okN, start: start}
		if okN+len(dead) == 0 { // redeliveries only: prev was finished above
			e.acknowledge(c)
			return nil
		}
		if !alone && okN > 0 && e.stateFits(next.State) != nil {
			e.putBack(batch) // the state outgrew the server: find the record alone
			e.alone = len(batch)
			return prev
		}
		if !alone && len(dead) == 0 {
			// prev's outputs are stored before this batch's are sent
			// (this batch's logic ran while they were on their way). One
			// of prev's lost to a stream leader that stepped down or died
			// is sent again, and must not be stored after one of this
			// batch's that the next leader took: a step-down moves a
			// leader within milliseconds, before any advisory says so.
			if prev != nil && !e.stored(prev, batch) {
				return nil
			}
			c.dropped = e.node.conn.Dropped()
			c.futures, c.err = e.startPublish(outs)
			if !settle() {
				return nil
			}
			return c
		}
		if !settle() {
			return nil
		}
		err := e.retryIO(func() error { return e.publishWithDead(outs, dead) })
		if err != nil && alone && len(dead) == 0 {
			// An output can never be published as it is: the record
			// goes to dead letters instead, its state unchanged.
			reason, failure := outputFailure(err)
			if reason != "" {
				dead = []deadOutcome{{d: batch[0], reason: reason, err: failure}}
				next.State, next.Status, next.Error = e.doc.State, StatusError, failure.Error()
				c.next, c.okN = next, 0
				err = e.retryIO(func() error { return e.publishWithDead(nil, dead) })
			}
		}
		if err != nil {
			switch {
			case alone:
				e.dropped(err)
			case !errors.Is(err, errAbandon):
				// An output or dead letter can never be published as it
				// is: take the records one at a time, where it
				// dead-letters its own record.
				e.putBack(batch)
				e.alone = len(batch)
			}
			return nil
		}
		c.dead = dead
		if e.commit(c, nil) == lost {
			if alone {
				continue // evaluate again on what won
			}
			e.putBack(batch)
		}
		return nil
	}
}

// commitment is a batch whose logic has run: its records to acknowledge,
// the state document to write and the outputs published (or on their way:
// futures, or the error that stopped them going). process returns one
// unfinished when batches are pipelined; finish ends it.
type commitment struct {
	acks    []delivery
	next    Document
	outs    []output
	dead    []deadOutcome
	futures []jetstream.PubAckFuture
	err     error           // why the outputs could not all be sent; finish sends them again
	dropped <-chan struct{} // the connection's Dropped channel when they were sent
	stored  bool            // every output is stored (stored returned true)
	okN     int
	start   time.Time
}

// finish ends a pipelined batch c: it awaits its outputs (publishing them
// again, with retries, when one failed), writes its state and acknowledges
// its records. It reports whether it did. When it did not, the records of c
// and then after, the records taken after c and built on its state, are
// put back to be taken again (unless the effector stops or gives up, when
// they stay unacknowledged), and the state document is as last written.
func (e *effector) finish(c *commitment, after []delivery) bool {
	if !e.stored(c, after) {
		return false
	}
	switch e.commit(c, after) {
	case committed:
		return true
	case lost:
		e.putBack(append(slices.Clip(c.acks), after...))
	}
	return false
}

// stored ends the publishing of a pipelined batch c: it awaits its outputs,
// publishing them all again, in order and with retries, when one failed,
// and reports whether every one is stored. When not, the records of c and
// then after are put back as finish says. Once it has reported true, a
// later call returns true at once.
func (e *effector) stored(c *commitment, after []delivery) bool {
	if c.stored {
		return true
	}
	err := c.err
	if err == nil {
		err = e.awaitPublish(c.futures, c.dropped)
	}
	if err != nil {
		err = e.retryIO(func() error { return e.publish(c.outs) })
	}
	if err != nil {
		if !errors.Is(err, errAbandon) {
			// An output can never be published as it is: take the records
			// one at a time, where it dead-letters its own record.
			e.putBack(append(slices.Clip(c.acks), after...))
			e.alone = len(c.acks)
		}
		return false
	}
	c.futures, c.err, c.stored = nil, nil, true
	return true
}

// outcome of commit.
type outcome int

const (
	committed outcome = iota // written and acknowledged
	lost                     // the compare-and-set was lost; the document is reloaded
	ended                    // stopped, crashed or terminated: nothing more to do
)

// commit writes the state of c, whose outputs and dead letters are
// published, and acknowledges its records; the document shows PROCESSING
// while records are held or taken after c. On a lost compare-and-set the
// caller decides what to do with the records; when the effector was
// terminated, they and after are put back (load sends them to dead
// letters).
func (e *effector) commit(c *commitment, after []delivery) outcome {
	for _, d := range c.acks {
		if e.crashed(afterOutputs, d.seq) {
			return ended
		}
	}
	next := c.next
	next.Updated = time.Now().UTC()
	if next.Status == StatusIdle && (len(after) > 0 || e.backlog() > 0) {
		next.Status = StatusProcessing
	}
	ok, stop := e.write(next)
	if stop {
		if ok { // written, though the effector stops before the acks
			e.counted(c)
		}
		e.putBack(append(slices.Clip(c.acks), after...)) // terminated: load sends them to dead letters
		return ended
	}
	if !ok {
		return lost
	}
	e.counted(c)
	for _, d := range c.acks {
		if e.crashed(afterState, d.seq) {
			return ended
		}
	}
	if !e.emitState(c.acks[len(c.acks)-1]) {
		return ended
	}
	e.acknowledge(c)
	return committed
}

// counted counts c's records applied and dead-lettered, once its state is
// written: a node that loses its lease between the write and the acks has
// applied them all the same, and the partition's next reader finds them
// applied (already_applied), so that ok summed over nodes counts each
// record applied once.
func (e *effector) counted(c *commitment) {
	m, kind := e.node.metrics, e.kind.name
	for _, x := range c.dead {
		e.km.dead.Inc()
		m.dead.WithLabelValues(kind, x.reason).Inc()
	}
	e.km.ok.Add(float64(c.okN))
}

// countSkip counts a redelivered record found applied: by an earlier reader
// of the partition when the document as read from the server shows it
// (already_applied), by this effector otherwise (duplicate).
func (e *effector) countSkip(seq uint64) {
	if e.found.applied(seq) {
		e.km.applied.Inc()
		e.logger().Debug("record found applied by an earlier reader", "seq", seq)
		return
	}
	e.km.duplicate.Inc()
}

// acknowledge acknowledges c's records, written and counted.
func (e *effector) acknowledge(c *commitment) {
	for _, d := range c.acks {
		e.ack(d)
	}
	for _, x := range c.dead {
		e.logger().Warn("record sent to dead letters", "record", x.d.rec.ID, "seq", x.d.seq, "reason", x.reason, "err", x.err)
	}
	per := time.Since(c.start).Seconds() / float64(len(c.acks))
	for range c.acks {
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
// written; stop, that the effector must stop (terminated, or stopping). A
// write stopped after an attempt whose answer was lost reports ok when the
// document there is its own (landedAfterStop).
func (e *effector) write(next Document) (ok, stop bool) {
	ok, stop, unanswered := e.writeState(next)
	if unanswered {
		// Rare (elections, reconnects), and what decides whether its
		// records are counted ok here.
		e.logger().Info("state write's answer was lost", "seq", next.Seq, "written", ok, "stopping", stop)
	}
	return ok, stop
}

// writeState is write; unanswered reports that an attempt failed without
// an answer (it may have been stored).
func (e *effector) writeState(next Document) (ok, stop, unanswered bool) {
	var rev uint64
	// Every attempt of this write carries one id: on a cluster, one made
	// after an earlier attempt was stored is answered with its revision.
	id := fmt.Sprintf("%s:%d:%d", e.key, next.Seq, next.Updated.UnixNano())
	err := e.retryIO(func() error {
		if err := e.ctx.Err(); err != nil {
			return err // stopped: not sent
		}
		var err error
		rev, err = e.node.states.UpdateOnce(e.ctx, e.key, next, e.rev, id)
		if err == nil && e.node.answerLost != nil && e.node.answerLost(e.ref, next.Seq) {
			e.giveUp()
			rev, err = 0, fmt.Errorf("update %s: %w", e.key, bus.ErrAckLost)
		}
		if errors.Is(err, kv.ErrConflict) {
			return nil
		}
		if err != nil {
			unanswered = true // sent, or not (stopped as it was): it may be stored
		}
		return err
	})
	if err != nil {
		// Stopping (the partition read again, the node stopping) with an
		// answer lost: when the write is stored all the same, its records
		// were applied here and are counted here, though left
		// unacknowledged; their next reader counts them already_applied.
		return unanswered && e.landedAfterStop(next), true, unanswered
	}
	if rev == 0 && unanswered {
		// Lost the compare-and-set after an attempt whose answer was lost
		// (a leader election): the document there may be our own write.
		if rev = e.landed(next); rev != 0 {
			e.doc, e.rev = next, rev
			return true, false, unanswered
		}
		if e.ctx.Err() != nil { // stopped while landed read
			return e.landedAfterStop(next), true, unanswered
		}
	}
	if rev == 0 { // lost the compare-and-set: someone else wrote
		found := e.found
		if !e.reload() {
			return unanswered && e.ctx.Err() != nil && e.landedAfterStop(next), true, unanswered
		}
		if unanswered && e.doc.sameWrite(next) {
			// Our own write after all, which landed could not see (read
			// from a replica that had not applied it yet).
			e.found = found
			return true, false, unanswered
		}
		e.node.metrics.conflicts.WithLabelValues(e.kind.name).Inc()
		return false, false, unanswered
	}
	e.doc, e.rev = next, rev
	return true, false, unanswered
}

// landed reads the state document from its stream's leader and returns
// its revision when it is next (Document.sameWrite), 0 otherwise or when it cannot
// tell. Then a write whose answer was lost counts as written, by this node:
// its records are counted ok here and not applied again. The leader, not a
// direct get: a replica may answer without the write yet, and a write of
// ours taken for another's has its records counted by nobody. On a cluster
// the write's id (states.UpdateOnce) has the server answer a retry of a
// stored write with its revision before any conflict comes to this; on a
// single server the revision is checked first.
func (e *effector) landed(next Document) uint64 {
	var rev uint64
	if err := e.retryIO(func() (err error) {
		rev, err = e.landedAt(e.ctx, next)
		return err
	}); err != nil {
		return 0
	}
	return rev
}

// landedAfterStop is landed for an effector that is stopping: it tries for
// at most two seconds (about a leader's election in a server's restart),
// whatever the effector's own context, and reports whether the document
// there is next.
func (e *effector) landedAfterStop(next Document) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), 2*time.Second)
	defer cancel()
	for {
		rev, err := e.landedAt(ctx, next)
		if err == nil {
			return rev != 0
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return false
		}
	}
}

// landedAt reads the state document from its stream's leader once: its
// revision when it is next, 0 when it is another (or none).
func (e *effector) landedAt(ctx context.Context, next Document) (uint64, error) {
	names := e.node.names
	m, err := e.node.conn.LastStored(ctx, names.StateStreamFor(e.ref), names.StateSubject(e.ref))
	if errors.Is(err, bus.ErrNoMessage) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return 0, nil
	}
	var doc Document
	if err := codec.Unmarshal(m.Data, &doc); err != nil {
		return 0, nil // not ours: ours decodes
	}
	if doc.sameWrite(next) {
		return m.Seq, nil
	}
	return 0, nil
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
			e.doc, e.rev = next, rev
		} // else: the next record's write catches up
	}
	if !e.restate(d) {
		return // stopping: d stays unacknowledged
	}
	e.ack(d)
	e.countSkip(d.seq)
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

// stateOverhead bounds what a KV write adds to the encoded document: the
// subject and the compare-and-set header.
const stateOverhead = 1024

// stateFits returns an error matching ErrTooLarge when the state document
// with state would exceed the server's max_payload. It encodes the document
// only when state is large enough to matter.
func (e *effector) stateFits(state []byte) error {
	limit := e.node.conn.MaxPayload()
	if limit <= 0 || int64(len(state)) < limit/2 {
		return nil
	}
	doc := e.doc
	doc.State, doc.Updated = state, time.Now().UTC()
	b, err := codec.Marshal(doc)
	if err != nil {
		return Permanent(fmt.Errorf("encode the state document: %w", err))
	}
	if int64(len(b)+stateOverhead) > limit {
		return Permanent(fmt.Errorf("%w: the new state document of %d bytes exceeds the server's max_payload of %d", ErrTooLarge, len(b), limit))
	}
	return nil
}
