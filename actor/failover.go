package actor

import (
	"context"
	"errors"
	"time"

	"github.com/effectors/effectors/internal/routine"
	"github.com/nats-io/nats.go"
)

// Failover inside the TTL: a node whose connection is gone is dead at once.
//
// A node not heard from for HeartbeatTTL is dead (see placement.go), so a
// node killed right after a heartbeat kept its partitions for the whole TTL
// (3 s with the defaults) before the others took them. But when a process
// dies, its operating system closes its sockets and the server drops its
// connection and its subscriptions at once; only a frozen process, or one
// cut off by a network fault the server has not noticed, keeps them.
//
// So every node subscribes to a subject of its own ([bus.Names.NodeAlive])
// for as long as it runs, and says so in its heartbeat (memberDoc.Probed).
// A node whose heartbeat is late by an eighth of a beat (suspectAfter) is
// probed: a request to its subject. The server answers a request to a
// subject nobody subscribes to with "no responders" at once: the node's
// connection is gone. When a probe sent an eighth of a beat later says so
// too (confirmAfter: a connection that dropped and came back at once, as
// when its server dies and it reconnects to another, is not taken for a
// dead node), the node is dead now rather than at the end of its TTL.
// Any other outcome (an answer, a timeout, an error) proves nothing, and the
// TTL decides as before: a frozen node, whose connection and subscription
// the server keeps, is found dead only by the TTL and fenced off at the
// server as before (see fence.go); a probe never makes a node look alive.
//
// The server's own disconnect advisory ($SYS.ACCOUNT.<account>.DISCONNECT)
// would say the same without the probe, but only to users of the system
// account, which a node's user has no reason to have; the probe needs only
// the node's own subjects.
//
// A "no responders" is trusted only while this node sees its own heartbeats
// (it is not blind, see placement.refresh) and its connection has not
// reconnected for a TTL: after a reconnect, or a restart of the server, the
// others' subscriptions may not be back yet. A live node whose connection
// stays down longer than confirmAfter (a network fault the server noticed)
// is found dead all the same: the others take its partitions, and it stops
// reading them when it sees its leases move, as a node that froze does; its
// next heartbeat makes it live again and the partitions that are its own
// come back to it. That
// costs hand-overs, never a record: leases and fencing keep one reader per
// partition whatever the verdict.
//
// A node of an older version does not subscribe, and is not probed.

// How a node left the live set (ea_node_departures_total{how}).
const (
	departureClosed  = "closed"  // its connection was gone (a probe)
	departureExpired = "expired" // no heartbeat for the TTL
	departureLeft    = "left"    // its heartbeat key was deleted: it stopped
)

// suspectAfter is how long a node's heartbeat may be missing before it is
// probed: a beat and an eighth. A live node's heartbeat is rarely that late,
// and a probe of a live node costs one request and its answer.
func suspectAfter(beat time.Duration) time.Duration { return beat + beat/8 }

// confirmAfter is how long after a first "no responders" a second one makes
// the verdict: an eighth of a beat.
func confirmAfter(beat time.Duration) time.Duration { return beat / 8 }

// serveAlive subscribes this node to its liveness subject, answering every
// probe, until leave.
func (p *placement) serveAlive() error {
	sub, err := p.n.conn.NATS().Subscribe(p.n.names.NodeAlive(p.id), func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.alive = sub
	p.mu.Unlock()
	return nil
}

// stopAlive ends the liveness subscription.
func (p *placement) stopAlive() {
	p.mu.Lock()
	sub := p.alive
	p.alive = nil
	p.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

// detect probes the nodes whose heartbeat is late, every sixteenth of a
// beat, until ctx ends; probes run on g.
func (p *placement) detect(ctx context.Context, g *routine.Group) {
	tick := max(p.beat/16, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	nc := p.n.conn.NATS()
	reconnects := nc.Stats().Reconnects
	var stable time.Time // since when the connection has not reconnected
	probing := map[string]bool{}
	done := make(chan string)
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-done:
			delete(probing, id)
		case now := <-t.C:
			if r := nc.Stats().Reconnects; r != reconnects {
				reconnects, stable = r, now
			}
			if now.Sub(stable) < p.ttl {
				continue
			}
			for _, m := range p.suspects(now) {
				id := m.doc.ID
				if probing[id] {
					continue
				}
				probing[id] = true
				g.Go("placement.probe", func() {
					p.probe(ctx, m)
					select {
					case done <- id:
					case <-ctx.Done():
					}
				})
			}
		}
	}
}

// suspects returns the live members other than this node that answer
// probes and whose heartbeat is late.
func (p *placement) suspects(now time.Time) []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blind {
		return nil
	}
	var out []*member
	for id, m := range p.members {
		if id != p.id && m.doc.ID == id && m.doc.Probed && !m.gone && now.Sub(m.seen) > suspectAfter(p.beat) && now.Sub(m.seen) < p.ttl {
			out = append(out, m)
		}
	}
	return out
}

// probe asks m's liveness subject whether m's connection is still open;
// when the server says nobody listens, twice, confirmAfter apart, m is dead
// from now on (until a newer heartbeat of it arrives).
func (p *placement) probe(ctx context.Context, m *member) {
	ctx, cancel := context.WithTimeout(ctx, max(p.beat/2, 100*time.Millisecond))
	defer cancel()
	start := time.Now()
	_, err := p.n.conn.NATS().RequestWithContext(ctx, p.n.names.NodeAlive(m.doc.ID), nil)
	none := errors.Is(err, nats.ErrNoResponders)
	p.mu.Lock()
	cur, ok := p.members[m.doc.ID]
	verdict := false
	switch {
	case !ok || cur != m || p.blind: // a newer heartbeat meanwhile, or we cannot tell
	case !none:
		m.noResponders = time.Time{}
	case m.noResponders.IsZero():
		m.noResponders = start
	case start.Sub(m.noResponders) >= confirmAfter(p.beat):
		m.gone, verdict = true, true
	}
	p.mu.Unlock()
	if !verdict {
		return
	}
	p.n.log.Info("node gone: its connection is closed", "node", m.doc.ID,
		"silent_for", start.Sub(m.seen).Round(time.Millisecond), "ttl", p.ttl)
	p.refresh(time.Now())
}
