package actor_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// fastPlacement makes membership changes take effect in a fraction of a
// second, so the tests run quickly: a node whose connection closes is found
// dead by its liveness probes within about a beat. The TTL is long enough
// not to flap on a loaded machine under the race detector: with 400ms,
// heartbeats acknowledged late had nodes declare each other dead and take
// every partition (128 lease writes and consumer resets at once), the
// server's API answered in seconds, and counts came 30-60s after a node's
// death.
var fastPlacement = actor.Options{Heartbeat: 250 * time.Millisecond, HeartbeatTTL: 2 * time.Second}

// createCounters creates counters c0..c<n-1>.
func createCounters(t testing.TB, c *actor.Client, n int) []records.Ref {
	t.Helper()
	refs := make([]records.Ref, n)
	for i := range refs {
		refs[i] = ref("counter", fmt.Sprintf("c%d", i))
		if _, err := c.Create(ctxT(t), refs[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	return refs
}

// publishAll publishes per incs to every ref, a few refs at a time.
func publishAll(t testing.TB, conn *bus.Conn, refs []records.Ref, per int) {
	t.Helper()
	if err := tryPublishAll(conn, refs, per); err != nil {
		t.Fatal(err)
	}
}

// tryPublishAll is publishAll for a goroutine other than the test's: it
// returns the first error instead of failing the test.
func tryPublishAll(conn *bus.Conn, refs []records.Ref, per int) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 3)
	errs := make(chan error, len(refs))
	for _, r := range refs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := tryPublishIncs(conn, r, per); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func active(t testing.TB, n *runningNode) float64 {
	return metricSum(t, n.Registry, "ea_effectors_active")
}

// TestPlacementSpreadsAndFailsOver runs three nodes on one server: the work
// spreads over all three; one node dies without a word (its connection
// drops) while records flow, and the other two take over its effectors;
// every count is exact and no output is duplicated.
func TestPlacementSpreadsAndFailsOver(t *testing.T) {
	srv, conn := server(t)
	c := newClient(t, conn)
	var nodes []*runningNode
	var conns []*bus.Conn
	for range 3 {
		nc := srv.Connect(t)
		conns = append(conns, nc)
		nodes = append(nodes, startNodeWith(t, nc, fastPlacement, nil))
	}
	actortest.Eventually(t, 10*time.Second, "three nodes see each other", func() bool {
		for _, n := range nodes {
			if metricSum(t, n.Registry, "ea_nodes_live") != 3 {
				return false
			}
		}
		return true
	})
	refs := createCounters(t, c, 60)
	publishAll(t, conn, refs, 20)
	waitCounts(t, conn, c, refs, 20, time.Minute)
	for i, n := range nodes {
		if a := active(t, n); a == 0 {
			t.Fatalf("node %d drives no effector: placement did not spread the work", i)
		}
	}

	// Node 0 dies mid-load: its connection drops, no goodbye.
	victim := active(t, nodes[0])
	done := make(chan error, 1)
	go func() { done <- tryPublishAll(conn, refs, 40) }()
	conns[0].NATS().Close()
	killed := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitCounts(t, conn, c, refs, 60, time.Minute)
	t.Logf("node 0 drove %v effectors; all counts exact %s after it died", victim, time.Since(killed).Round(time.Millisecond))
	var handovers float64
	for _, n := range nodes[1:] {
		handovers += metricSum(t, n.Registry, "ea_handovers_total")
	}
	if handovers == 0 {
		t.Fatal("no hand-over recorded by the surviving nodes")
	}
}

// TestJoiningNodeTakesItsShare starts one node under load, then a second:
// the second takes over its share while records flow, and counts stay exact.
func TestJoiningNodeTakesItsShare(t *testing.T) {
	t.Parallel()
	srv, conn := server(t)
	c := newClient(t, conn)
	first := startNodeWith(t, srv.Connect(t), fastPlacement, nil)
	refs := createCounters(t, c, 40)
	publishAll(t, conn, refs, 20)
	actortest.Eventually(t, 30*time.Second, "first node has all loaded", func() bool { return active(t, first) == 40 })
	done := make(chan error, 1)
	go func() { done <- tryPublishAll(conn, refs, 100) }()
	second := startNodeWith(t, srv.Connect(t), fastPlacement, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitCounts(t, conn, c, refs, 120, time.Minute)
	actortest.Eventually(t, 10*time.Second, "the partitions are split", func() bool {
		a, b := first.Reading(), second.Reading()
		return a > 0 && b > 0 && a+b == 2*conn.Names().Partitions()
	})
	// The load may all have been applied before the hand-over: one more
	// record each, after the split, reaches the effectors of both nodes.
	publishAll(t, conn, refs, 1)
	waitCountsOnly(t, c, refs, 121, time.Minute)
	// Checked only now: with 8 partitions a kind the first node can apply
	// the whole load before the hand-over.
	if h := metricSum(t, second.Registry, "ea_handovers_total") + metricSum(t, second.Registry, "ea_activations_total"); h == 0 {
		t.Fatal("the joining node took over nothing")
	}
	if active(t, second) == 0 {
		t.Fatal("the joining node loaded no effector")
	}
	waitCounts(t, conn, c, refs, 121, time.Minute)
}

// TestTwoDriversNeverDoubleApply makes two nodes both believe they own every
// partition for a while, so they fight over each one (a node that sees the
// other's lease go stale takes it and resets the consumer under the other;
// the loser sees a gap in consumer sequences): the state's compare-and-set
// and seq must still apply every record exactly once.
func TestTwoDriversNeverDoubleApply(t *testing.T) {
	srv, conn := server(t)
	c := newClient(t, conn)
	var fight atomic.Bool
	fight.Store(true)
	var nodes []*runningNode
	for range 2 {
		nodes = append(nodes, startNodeWith(t, srv.Connect(t), fastPlacement, func(n *actor.Node) {
			id := n.ID()
			n.SetOwner(func(string, int) (string, bool) { return id, fight.Load() })
			n.SetSteal(fight.Load)
		}))
	}
	refs := createCounters(t, c, 10)
	// In waves, so that the fight goes on while records flow (in one burst,
	// a node can apply everything before the other takes anything), until
	// both nodes have applied records.
	both := func() bool {
		return metricSum(t, nodes[0].Registry, "ea_records_processed_total") > 0 &&
			metricSum(t, nodes[1].Registry, "ea_records_processed_total") > 0
	}
	const perWave = 40
	waves := 0
	applied := func() bool { // every wave published so far is applied
		for _, r := range refs {
			if count(t, c, r) < int64(waves*perWave) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for waves < 3 || !both() {
		if time.Now().After(deadline) {
			t.Fatalf("after %d waves of %d records each, one node has still processed none", waves, perWave)
		}
		if waves < 3 || applied() {
			publishAll(t, conn, refs, perWave)
			waves++
		}
		time.Sleep(300 * time.Millisecond)
	}
	want := int64(waves * perWave)
	time.Sleep(time.Second) // let them fight over the rest
	fight.Store(false)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Log(n.Debug())
			}
			for _, r := range refs {
				doc, err := c.State(ctxT(t), r)
				t.Logf("%s: seq %d ahead %v count %d status %s err %v", r, doc.Seq, doc.Ahead, count(t, c, r), doc.Status, err)
			}
		}
	})
	waitCounts(t, conn, c, refs, want, time.Minute)
	for _, r := range refs {
		checkCountOutputs(t, conn, r, upTo(want))
	}
	var handovers float64
	for _, n := range nodes {
		handovers += metricSum(t, n.Registry, "ea_handovers_total")
	}
	if handovers == 0 {
		t.Fatal("the nodes never took an effector from each other: the test proves nothing")
	}
	t.Logf("%v hand-overs between the two nodes", handovers)
}

// TestPassivationAndActivation: an idle effector is dropped from memory; the
// next record loads it again. The server holds nothing per effector: the
// mailbox stream has one consumer per partition of each kind, before, during
// and after.
func TestPassivationAndActivation(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	opts := fastPlacement
	opts.IdleTimeout = 200 * time.Millisecond
	n := startNodeWith(t, conn, opts, nil)
	c := newClient(t, conn)
	r := ref("counter", "p1")
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	stream, err := conn.MailboxStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := stream.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	want := (conn.Names().Partitions() + 1) * len(n.Node.Kinds())
	if got := consumers(); got != want {
		t.Fatalf("%d consumers on the mailbox stream, want %d (one per partition of each kind, and one <kind>~strays per kind)", got, want)
	}
	if a := active(t, n); a != 0 {
		t.Fatalf("%v effectors loaded before any record: a created effector should start passive", a)
	}
	for round := int64(1); round <= 3; round++ {
		publishIncs(t, conn, r, 1)
		waitCount(t, conn, c, r, round, 10*time.Second)
		if got := consumers(); got != want {
			t.Fatalf("%d consumers on the mailbox stream while active, want %d", got, want)
		}
		actortest.Eventually(t, 10*time.Second, "passivated", func() bool { return active(t, n) == 0 })
	}
	if a := metricSum(t, n.Registry, "ea_activations_total"); a != 3 {
		t.Fatalf("activations = %v, want 3", a)
	}
	if p := metricSum(t, n.Registry, "ea_passivations_total"); p != 3 {
		t.Fatalf("passivations = %v, want 3", p)
	}
}

// TestRecordsWhileNoNodeRuns: records published while no node runs are
// processed once one starts (the partition consumers resume from their ack
// floors).
func TestRecordsWhileNoNodeRuns(t *testing.T) {
	t.Parallel()
	srv, conn := server(t)
	c := newClient(t, conn)
	n := startNodeWith(t, srv.Connect(t), fastPlacement, nil)
	refs := createCounters(t, c, 20)
	publishAll(t, conn, refs, 5)
	waitCounts(t, conn, c, refs, 5, 30*time.Second)
	n.Stop(t)
	publishAll(t, conn, refs, 7)
	startNodeWith(t, srv.Connect(t), fastPlacement, nil)
	waitCounts(t, conn, c, refs, 12, 30*time.Second)
}

// TestStrayRecordsGoToDeadLetters: records a plain client sends to an
// effector never created, or terminated, end in dead letters with a reason.
func TestStrayRecordsGoToDeadLetters(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNodeWith(t, conn, fastPlacement, nil)
	c := newClient(t, conn)
	ghost := ref("counter", "ghost")
	publishIncs(t, conn, ghost, 2)
	gone := ref("counter", "gone")
	if _, err := c.Create(ctxT(t), gone, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, gone, 1)
	waitCount(t, conn, c, gone, 1, 10*time.Second)
	if _, err := c.Terminate(ctxT(t), gone); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, gone, 3)
	for r, want := range map[records.Ref]struct {
		reason string
		n      int
	}{ghost: {"no_effector", 2}, gone: {"terminated", 3}} {
		dead, err := c.DeadLetters(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for dl, err := range dead {
			if err != nil {
				t.Fatal(err)
			}
			if dl.Reason != want.reason {
				t.Fatalf("%s: dead letter reason %q, want %q", r, dl.Reason, want.reason)
			}
			if got++; got == want.n {
				break
			}
		}
	}
	if got := count(t, c, gone); got != 1 {
		t.Fatalf("terminated counter counted %d, want 1", got)
	}
}
