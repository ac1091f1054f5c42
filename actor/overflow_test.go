package actor_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
)

type lagState struct {
	Count int64 `json:"count"`
}

// lagKind counts records; the effector "slow" takes 10ms per record.
func lagKind() actor.Kind[lagState] {
	return actor.Kind[lagState]{
		Name: "lag",
		Logic: func(ctx *actor.Context, s lagState) (lagState, error) {
			if ctx.Self().ID == "slow" {
				time.Sleep(10 * time.Millisecond)
			}
			s.Count++
			return s, nil
		},
	}
}

// neighbours returns n ids whose mailboxes share the partition of "slow".
func neighbours(names bus.Names, n int) []records.Ref {
	p := names.Partition(records.Ref{Kind: "lag", ID: "slow"})
	var out []records.Ref
	for i := 0; len(out) < n; i++ {
		r := records.Ref{Kind: "lag", ID: fmt.Sprint("n", i)}
		if names.Partition(r) == p {
			out = append(out, r)
		}
	}
	return out
}

func lagCount(t testing.TB, c *actor.Client, r records.Ref) int64 {
	t.Helper()
	doc, err := c.State(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	var s lagState
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Count
}

// TestSlowEffectorDoesNotBlockItsPartition: a slow effector with a deep
// backlog reads its own mailbox (overflow) instead of holding its
// partition's window, so the other effectors of its partition are served
// while it works through its backlog; it still applies every record once, in
// order, and goes back to its partition when it has caught up.
func TestSlowEffectorDoesNotBlockItsPartition(t *testing.T) {
	t.Parallel()
	layouts(t, slowEffectorDoesNotBlockItsPartition)
}

func slowEffectorDoesNotBlockItsPartition(t *testing.T, conn *bus.Conn) {
	n := startNode(t, conn, nil, lagKind())
	c := newClient(t, conn)
	slow := records.Ref{Kind: "lag", ID: "slow"}
	others := neighbours(conn.Names(), 20)
	for _, r := range append([]records.Ref{slow}, others...) {
		if _, err := c.Create(ctxT(t), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	const backlog, each = 600, 20
	publishIncs(t, conn, slow, backlog)
	for _, r := range others {
		publishIncs(t, conn, r, each)
	}
	actortest.Eventually(t, time.Minute, "the neighbours served", func() bool {
		for _, r := range others {
			if lagCount(t, c, r) != each {
				return false
			}
		}
		return true
	})
	done := lagCount(t, c, slow)
	t.Logf("neighbours served while the slow effector had applied %d of %d", done, backlog)
	if done > backlog/2 {
		t.Fatalf("the neighbours were served only after the slow effector applied %d of %d records: they waited behind its backlog", done, backlog)
	}
	if got := metricSum(t, n.Registry, "ea_overflows_total", "kind", "lag"); got < 1 {
		t.Fatalf("ea_overflows_total = %v, want at least 1", got)
	}
	waitLag(t, c, slow, backlog)
	// Back to its partition: its own consumer is gone, and a new record goes
	// through the partition.
	actortest.Eventually(t, 30*time.Second, "own consumer deleted", func() bool { return ownConsumers(t, conn) == 0 })
	publishIncs(t, conn, slow, 1)
	waitLag(t, c, slow, backlog+1)
}

// TestOverflowSurvivesRestart: the node stops while an effector reads its
// own mailbox; the next node finds its own consumer and goes on from it:
// every record applied exactly once.
func TestOverflowSurvivesRestart(t *testing.T) {
	t.Parallel()
	layouts(t, overflowSurvivesRestart)
}

func overflowSurvivesRestart(t *testing.T, conn *bus.Conn) {
	n := startNode(t, conn, nil, lagKind())
	c := newClient(t, conn)
	slow := records.Ref{Kind: "lag", ID: "slow"}
	if _, err := c.Create(ctxT(t), slow, nil); err != nil {
		t.Fatal(err)
	}
	const backlog = 500
	publishIncs(t, conn, slow, backlog)
	actortest.Eventually(t, 30*time.Second, "overflowing", func() bool {
		return metricSum(t, n.Registry, "ea_overflows_total", "kind", "lag") >= 1 && lagCount(t, c, slow) > 50
	})
	n.Stop(t)
	at := lagCount(t, c, slow)
	if at >= backlog {
		t.Fatalf("all %d applied before the stop: the test proves nothing", at)
	}
	if ownConsumers(t, conn) != 1 {
		t.Fatalf("%d own consumers after the stop, want 1 (it is the durable mark)", ownConsumers(t, conn))
	}
	startNode(t, conn, nil, lagKind())
	waitLag(t, c, slow, backlog)
	time.Sleep(500 * time.Millisecond) // nothing more may come
	if got := lagCount(t, c, slow); got != backlog {
		t.Fatalf("count %d after the restart, want exactly %d", got, backlog)
	}
}

func waitLag(t testing.TB, c *actor.Client, r records.Ref, want int64) {
	t.Helper()
	actortest.Eventually(t, 2*time.Minute, fmt.Sprintf("count of %s reaches %d", r, want), func() bool {
		got := lagCount(t, c, r)
		if got > want {
			t.Fatalf("count of %s is %d, above %d: a record was applied twice", r, got, want)
		}
		return got == want
	})
}

// ownConsumers counts the own consumers (overflow) on the mailbox streams
// (one, or every stream group's).
func ownConsumers(t testing.TB, conn *bus.Conn) int {
	t.Helper()
	n := conn.Names()
	total := 0
	for g := range n.Groups() {
		s, err := conn.MailboxStreamOf(ctxT(t), g)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		total += info.State.Consumers
	}
	// One kind hosted: its partitions, and with one stream its <kind>~strays.
	total -= n.Partitions()
	if n.Groups() == 1 {
		total--
	}
	return total
}

// layouts runs test on a server with one mailbox stream and on one with
// stream groups (4 of 8 partitions), each with a connection that knows it.
func layouts(t *testing.T, test func(t *testing.T, conn *bus.Conn)) {
	t.Run("one stream", func(t *testing.T) {
		t.Parallel()
		_, conn := server(t)
		test(t, conn)
	})
	t.Run("stream groups", func(t *testing.T) {
		t.Parallel()
		srv := bustest.NewServer(t)
		srv.MapPartitions(t, 8)
		test(t, srv.Connect(t, bus.Config{Partitions: 8, Groups: 4}))
	})
}

// TestOverflowSurvivesCrash: the node "dies" right after writing the state
// of a record that its own consumer delivered (before acknowledging it); its
// partition is read again and the effector goes on from its own consumer's
// ack floor: every record applied exactly once.
func TestOverflowSurvivesCrash(t *testing.T) {
	t.Parallel()
	layouts(t, overflowSurvivesCrash)
}

func overflowSurvivesCrash(t *testing.T, conn *bus.Conn) {
	var crashed atomic.Bool
	n := startNode(t, conn, func(n *actor.Node) {
		n.SetCrash(func(p actor.CrashPoint, r records.Ref, seq uint64) bool {
			return p == actor.AfterState && r.ID == "slow" && seq == 300 && crashed.CompareAndSwap(false, true)
		})
	}, lagKind())
	c := newClient(t, conn)
	slow := records.Ref{Kind: "lag", ID: "slow"}
	if _, err := c.Create(ctxT(t), slow, nil); err != nil {
		t.Fatal(err)
	}
	const backlog = 500
	publishIncs(t, conn, slow, backlog)
	waitLag(t, c, slow, backlog)
	time.Sleep(500 * time.Millisecond) // nothing more may come
	if got := lagCount(t, c, slow); got != backlog {
		t.Fatalf("count %d, want exactly %d", got, backlog)
	}
	if !crashed.Load() {
		t.Fatal("the crash point was never reached: the test proves nothing")
	}
	if got := metricSum(t, n.Registry, "ea_overflows_total", "kind", "lag"); got < 1 {
		t.Fatalf("ea_overflows_total = %v: the record at the crash was not read through the own consumer", got)
	}
}
