package actor

import (
	"context"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// slowLogic is how long logic runs on one record before the state document
// shows PROCESSING.
const slowLogic = 250 * time.Millisecond

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
	e.mu.Lock()
	if !e.handSince.Equal(since) || e.marked {
		e.mu.Unlock()
		return // the record is done, or another pass marks it
	}
	e.marked = true
	done := make(chan struct{})
	e.marking = done
	// A record is in hand, so the drain goroutine runs and drainers is
	// above zero: stop waits for this write too.
	e.drainers.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.drainers.Done()
		defer close(done)
		e.markProcessing()
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

// markProcessing shows PROCESSING in the state document while slow logic
// runs. Until it returns it owns doc and rev: the drain goroutine, in
// logic meanwhile, waits for it before it reads them again (see attempt).
// No lock is held across the write.
func (e *effector) markProcessing() {
	next := e.doc
	next.Status, next.Updated = StatusProcessing, time.Now().UTC()
	rev, err := e.node.states.Update(e.ctx, e.key, next, e.rev)
	if err != nil {
		return // the final write will find out
	}
	e.doc, e.rev = next, rev
}

// watch runs the slow-logic watchdog over every busy effector until ctx ends,
// and looks for stalled ones (see Options.StallAfter) once a second.
func (n *Node) watch(ctx context.Context) {
	t := time.NewTicker(slowLogic / 2)
	defer t.Stop()
	st := &stalls{since: make(map[records.Ref]time.Time)}
	var looked time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			busy := n.busy.list()
			for _, e := range busy {
				e.checkSlow(now)
			}
			if now.Sub(looked) >= time.Second {
				looked = now
				counts := n.lookForStalls(ctx, st, busy, now)
				n.stalled.Store(&counts)
			}
		}
	}
}
