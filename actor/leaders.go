package actor

import (
	"context"
	"errors"
	"time"

	"github.com/effectors/effectors/bus"
)

// spreadAgain is how soon the spread is checked again after a leader moved:
// one election at a time, each given time to settle.
const spreadAgain = 3 * time.Second

// spreadCalm is how long every stream's leader must have been in place
// (bus.Conn.SpreadLeader's calm) before a leader is moved: a move is an
// election of its own, and writes in flight to the leader stepping down wait
// for their answer (sent again after ackTimeout). Right after a server's
// return, or between the steps of a rolling restart, the records waiting
// are worth more than the spread: in the cluster torture runs a move a
// moment after a restarted server came back held some counters 2 s. It also
// spaces the moves themselves.
const spreadCalm = 5 * time.Second

// spreadLeaders keeps the leaders of the deployment's replicated streams spread
// over the cluster's servers (Options.SpreadLeaders): every period, if this
// node is the live node with the lowest id and sees its own heartbeats, it
// asks bus.Conn.SpreadLeader to move one leader, and checks again
// spreadAgain later when it did. One node acts at a time (two that both
// think themselves lowest for a moment compute the same plan from the same
// stream infos, so at worst they ask the same step-down twice), nothing
// moves while a server is away nor within spreadCalm of any stream's
// election, and a leader moves only to a replica that is current.
func (p *placement) spreadLeaders(ctx context.Context) {
	every := p.n.opts.SpreadLeaders
	if every < 0 {
		return
	}
	wait := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = every
		if !p.spreader() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := p.n.conn.SpreadLeader(sctx, spreadCalm)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, bus.ErrUnsteady):
			p.n.log.Debug("spread stream leaders: not now", "err", err)
			wait = min(every, spreadAgain)
		case err != nil:
			p.n.log.Debug("spread stream leaders: not now", "err", err)
		case m.Stream != "":
			p.n.metrics.leaderMoves.Inc()
			p.n.log.Info("moved a stream's leader to spread the cluster's writes again", "stream", m.Stream, "from", m.From, "to", m.To)
			wait = spreadAgain
		}
	}
}

// spreader reports whether this node is the one that spreads leaders: the
// live node with the lowest id, not blind.
func (p *placement) spreader() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.blind && len(p.live) > 0 && p.live[0] == p.id
}
