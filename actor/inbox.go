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
	var prev *commitment // the batch before, not yet finished (see process)
	for {
		e.mu.Lock()
		e.progress = time.Now()
		if prev != nil && (e.stopped || len(e.held) == 0 || e.stale.Load()) {
			// Nothing to pipeline it with, or the document must be read
			// again: finish it first. Past this, with a batch in flight,
			// records are held and the effector was not stopped (mu is
			// held throughout), so neither branch below is taken.
			e.mu.Unlock()
			e.finish(prev, nil)
			prev = nil
			continue
		}
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
		// With a batch in flight the document is loaded, and must not be
		// read again under it (a notice may have made it stale since the
		// look above): the batch's write finds out instead, and load runs
		// once it is finished.
		if prev == nil && !e.load() {
			continue // stopped, or its records went to dead letters
		}
		n := e.kind.maxBatch
		if e.alone > 0 {
			n, e.alone = 1, e.alone-1
		}
		e.mu.Lock()
		batch := e.take(n)
		e.mu.Unlock()
		prev = e.process(batch, prev)
	}
}

// take removes up to n held records, in the order they are to be applied:
// high priority first, then stream order (the order held keeps). Without a
// high-priority record held it takes the first n and moves nothing; with
// one it walks held once and compacts it once. (It used to move every
// record held down by one for each record taken: with a window of records
// of a few hundred bytes each, that showed in profiles.) The caller holds
// mu.
func (e *effector) take(n int) []delivery {
	n = min(n, len(e.held))
	if n <= 0 {
		if len(e.held) == 0 {
			e.held = nil
		}
		return nil
	}
	high := 0 // high-priority records held, up to n
	for _, d := range e.held {
		if d.rec.Priority == records.PriorityHigh {
			if high++; high == n {
				break
			}
		}
	}
	if high == 0 && n == len(e.held) { // the most common case: all of them
		out := e.held
		e.held = nil
		return out
	}
	if high == 0 { // the common case: the first n, without moving the rest
		out := slices.Clone(e.held[:n])
		clear(e.held[:n]) // no stale record kept alive in the freed slots
		if e.held = e.held[n:]; len(e.held) == 0 {
			e.held = nil
		}
		return out
	}
	out := make([]delivery, 0, n)
	for _, d := range e.held { // the first high ones, in stream order
		if len(out) == high {
			break
		}
		if d.rec.Priority == records.PriorityHigh {
			out = append(out, d)
		}
	}
	low := n - high // then the first others
	rest := e.held[:0]
	h, l := high, low
	for _, d := range e.held {
		switch {
		case d.rec.Priority == records.PriorityHigh && h > 0:
			h--
		case d.rec.Priority != records.PriorityHigh && l > 0:
			out = append(out, d)
			l--
		default:
			rest = append(rest, d)
		}
	}
	clear(e.held[len(rest):]) // no stale record kept alive in the freed slots
	e.held = rest
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
