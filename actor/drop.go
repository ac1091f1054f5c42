package actor

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Drops: acknowledging a record without applying it.
//
// A partition acknowledges the records of an effector that reads its own
// mailbox (overflow.go) without applying them: its own consumer delivers them
// again. That is safe only while the own consumer exists, and the partition's
// new reader deletes it when the effector catches up. A former reader that
// has not yet noticed the lease moved (its view of the lease lags, or the new
// reader took the lease while it still heartbeats) could otherwise drop a
// record after the own consumer is gone, and nobody would ever apply it. The
// claim (fence.go) does not help there: a node that is alive holds it.
//
// So a partition drops records only within dropTrust of reading, at the
// server, that its lease is still the one it is read under; a record it may
// not drop stays unacknowledged and comes again. And an effector leaves its
// own consumer no sooner than leaveAfter after its partition was opened: any
// former reader's last reading of its lease came before this reader took the
// lease, so its drops end dropTrust later, before the own consumer goes
// (leaveAfter leaves as much again for an acknowledgement on its way). What
// is left is a reader frozen between its check and the acknowledgement it
// guards for longer than that margin, the same residual as the claim's.
const (
	dropTrust  = 250 * time.Millisecond
	leaveAfter = 2 * dropTrust
)

// mayDrop reports whether the partition may acknowledge a record it does
// not apply, or delete an own consumer, now: its node's claim holds, it was
// opened leaveAfter ago or more (a former reader's drops are over), and its
// lease was read at the server within dropTrust as the one it is read under.
// A lease that moved gives the partition up.
func (p *partition) mayDrop(ctx context.Context) bool {
	n := p.node
	if p.leaveIn() > 0 || p.failed() || n.claim.state(p.epoch.Load()) != claimHeld {
		return false
	}
	p.mu.Lock()
	fresh := !p.verified.IsZero() && time.Since(p.verified) < dropTrust
	p.mu.Unlock()
	if fresh {
		return true
	}
	place := n.place.Load()
	if place == nil {
		return false
	}
	asked := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := place.kv.Get(ctx, n.names.LeaseKey(p.kind.name, p.num))
	gone := errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
	if gone || err == nil && e.Revision() != p.lease {
		p.log.Info("the partition's lease moved: giving it up", "read_under", p.lease, "err", err)
		p.fail()
		return false
	}
	if err != nil {
		return false // unknown: the record stays unacknowledged and comes again
	}
	p.mu.Lock()
	p.verified = asked
	p.mu.Unlock()
	return true
}

// drop acknowledges msg, a record the partition does not apply (its
// effector's own consumer delivers it), when it may (mayDrop), with the
// drops it had to put off before; else it puts this one off too. Put-off
// drops are bounded by the partition's window; a partition given up leaves
// them unacknowledged for the next reader. It runs on the partition's
// goroutine.
func (p *partition) drop(ctx context.Context, msg jetstream.Msg) {
	if !p.mayDrop(ctx) {
		p.mu.Lock()
		p.deferred = append(p.deferred, msg)
		if p.flush == nil && !p.stopped {
			// They take room in the window: no later delivery may come to
			// flush them.
			p.flush = time.AfterFunc(max(p.leaveIn(), dropTrust/5), p.flushLater)
		}
		p.mu.Unlock()
		return
	}
	p.ackDeferred()
	_ = msg.Ack()
}

// flushLater flushes the drops put off, and tries again later while it may
// not yet.
func (p *partition) flushLater() {
	p.flushDrops(p.node.runCtx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flush = nil
	if len(p.deferred) > 0 && !p.stopped && !p.lost {
		p.flush = time.AfterFunc(max(p.leaveIn(), dropTrust/5), p.flushLater)
	}
}

// flushDrops acknowledges the drops put off, when the partition may.
func (p *partition) flushDrops(ctx context.Context) {
	p.mu.Lock()
	n := len(p.deferred)
	p.mu.Unlock()
	if n == 0 || !p.mayDrop(ctx) {
		return
	}
	p.ackDeferred()
}

// ackDeferred acknowledges the drops put off; the caller checked mayDrop.
func (p *partition) ackDeferred() {
	p.mu.Lock()
	later := p.deferred
	p.deferred = nil
	p.mu.Unlock()
	for _, m := range later {
		_ = m.Ack()
	}
}

// leaveIn is how long an effector of the partition must still wait before
// it may delete its own consumer (0: now); see "Drops".
func (p *partition) leaveIn() time.Duration {
	return max(0, leaveAfter-time.Since(p.opened))
}
