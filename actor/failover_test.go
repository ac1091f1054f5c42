package actor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
)

// TestClosedNodeFoundBeforeTTL runs three nodes with a 30 s heartbeat TTL
// and closes one's connection, as the operating system does for a killed
// process: the others find it dead by a probe of its liveness subject (the
// server answers "no responders"), not by its heartbeat expiring, and take
// its partitions within a third of the TTL; every count is exact and every
// output said once.
func TestClosedNodeFoundBeforeTTL(t *testing.T) {
	const ttl = 30 * time.Second
	opts := actor.Options{Heartbeat: 100 * time.Millisecond, HeartbeatTTL: ttl}
	cfg := bus.Config{Partitions: 16}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, cfg)
	c := newClient(t, conn)
	leases := watchLeases(t, conn)
	parts := 2 * conn.Names().Partitions() // counter and controller
	var nodes []*runningNode
	var conns []*bus.Conn
	for i := 1; i <= 3; i++ {
		o := opts
		o.NodeID = fmt.Sprintf("n%d", i)
		nc := srv.Connect(t, cfg)
		conns = append(conns, nc)
		nodes = append(nodes, startNodeWith(t, nc, o, nil))
	}
	actortest.Eventually(t, 30*time.Second, "every lease held, n1 among the holders", func() bool {
		held := leases.holders()
		return len(held) == parts && countOf(held, "n1") > 0
	})
	refs := createCounters(t, c, 30)
	publishAll(t, conn, refs, 5)
	for _, r := range refs {
		waitCount(t, conn, c, r, 5, 30*time.Second)
	}

	conns[0].NATS().Close()
	closed := time.Now()
	actortest.Eventually(t, ttl/3, "no lease names n1, every lease held", func() bool {
		held := leases.holders()
		return len(held) == parts && countOf(held, "n1") == 0
	})
	t.Logf("n1's leases all moved %s after its connection closed (TTL %s)", time.Since(closed).Round(time.Millisecond), ttl)
	for _, n := range nodes[1:] {
		if got := metricSum(t, n.Registry, "ea_node_departures_total", "how", "closed"); got != 1 {
			t.Errorf("node %s counted %v departures by a closed connection, want 1", n.Node.ID(), got)
		}
	}
	publishAll(t, conn, refs, 5)
	for _, r := range refs {
		waitCount(t, conn, c, r, 10, 30*time.Second)
	}
}

// TestFrozenNodeIsNotProbedDead freezes a node's connection (a proxy holds
// every byte, the server keeps the connection, as for SIGSTOP): a probe of
// its liveness subject finds a subscriber and gets no answer, which proves
// nothing, so the other node finds it dead by its heartbeat expiring, and
// takes its partitions then (fenced at the server: see TestFrozenNodeIsFenced).
func TestFrozenNodeIsNotProbedDead(t *testing.T) {
	const beat, ttl = 100 * time.Millisecond, time.Second
	opts := actor.Options{Heartbeat: beat, HeartbeatTTL: ttl}
	cfg := bus.Config{Partitions: 16}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, cfg)
	leases := watchLeases(t, conn)
	proxy := proctest.StartNATSProxy(t, strings.TrimPrefix(srv.URL, "nats://"))
	fo := opts
	fo.NodeID = "frozen"
	frozen := startNodeWith(t, connectVia(t, proxy.URL(), cfg), fo, nil)
	other := startNodeWith(t, srv.Connect(t, cfg), opts, nil)
	actortest.Eventually(t, 30*time.Second, "both nodes hold leases", func() bool {
		held := leases.holders()
		return len(held) == 2*conn.Names().Partitions() && countOf(held, "frozen") > 0 && frozen.Reading() > 0 && other.Reading() > 0
	})
	proxy.Freeze()
	defer proxy.Thaw()
	actortest.Eventually(t, 20*time.Second, "the other node takes every lease", func() bool {
		return countOf(leases.holders(), "frozen") == 0
	})
	if got := metricSum(t, other.Registry, "ea_node_departures_total", "how", "expired"); got != 1 {
		t.Errorf("%v departures by an expired heartbeat, want 1 (the frozen node)", got)
	}
	if got := metricSum(t, other.Registry, "ea_node_departures_total", "how", "closed"); got != 0 {
		t.Errorf("%v departures by a closed connection, want 0: the frozen node's connection is open", got)
	}
}
