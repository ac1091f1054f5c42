package actor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

type orderState struct {
	Order []string `json:"order"`
}

// gateKind records the payload label of every record in order; a record of
// type "block" waits on the gate before it is recorded.
func gateKind(started chan<- struct{}, gate <-chan struct{}) actor.Kind[orderState] {
	return actor.Kind[orderState]{
		Name: "gate",
		Logic: func(ctx *actor.Context, s orderState) (orderState, error) {
			var label string
			if err := ctx.Decode(&label); err != nil {
				return s, err
			}
			if ctx.Record().Type == "block" {
				started <- struct{}{}
				select {
				case <-gate:
				case <-ctx.Done():
					return s, ctx.Err()
				}
			}
			s.Order = append(s.Order, label)
			return s, nil
		},
	}
}

func sendLabel(t testing.TB, c *actor.Client, r records.Ref, typ, label string, high bool) {
	t.Helper()
	rec, err := records.New(typ, label)
	if err != nil {
		t.Fatal(err)
	}
	if high {
		rec.Priority = records.PriorityHigh
	}
	if _, err := c.Send(context.Background(), r, rec); err != nil {
		t.Fatal(err)
	}
}

func orderOf(t testing.TB, c *actor.Client, r records.Ref) (orderState, actor.Document) {
	t.Helper()
	doc, err := c.State(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var s orderState
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s, doc
}

func TestHighPriorityOvertakes(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	started, gate := make(chan struct{}, 1), make(chan struct{})
	node := startNode(t, conn, nil, gateKind(started, gate))
	c := newClient(t, conn)
	g := ref("gate", "g1")
	if _, err := c.Create(ctxT(t), g, nil); err != nil {
		t.Fatal(err)
	}
	sendLabel(t, c, g, "block", "block", false)
	<-started
	var want []string
	for i := range 20 {
		sendLabel(t, c, g, "item", fmt.Sprint("n", i), false)
		want = append(want, fmt.Sprint("n", i))
	}
	sendLabel(t, c, g, "item", "high", true)
	// Wait until the node holds all 21 waiting records, then open the gate.
	actortest.Eventually(t, 10*time.Second, "records held", func() bool {
		return metricSum(t, node.Registry, "ea_mailbox_backlog", "kind", "gate") == 21
	})
	close(gate)
	want = append([]string{"block", "high"}, want...)
	actortest.Eventually(t, 10*time.Second, "all processed", func() bool {
		s, _ := orderOf(t, c, g)
		return len(s.Order) == len(want)
	})
	s, doc := orderOf(t, c, g)
	if !slices.Equal(s.Order, want) {
		t.Fatalf("order = %v\nwant    %v", s.Order, want)
	}
	if len(doc.Ahead) != 0 {
		t.Fatalf("ahead = %v after everything was applied, want none", doc.Ahead)
	}
}

// TestCrash kills the processing loop at each risky point and checks, after
// a restart, that the count is exact and no output was published twice.
func TestCrash(t *testing.T) {
	t.Parallel()
	for _, point := range []actor.CrashPoint{actor.AfterOutputs, actor.AfterState} {
		t.Run(fmt.Sprint("point=", point), func(t *testing.T) {
			t.Parallel()
			_, conn := server(t)
			c1 := ref("counter", "c1")
			first := startNode(t, conn, nil)
			c := newClient(t, conn)
			if _, err := c.Create(ctxT(t), c1, nil); err != nil {
				t.Fatal(err)
			}
			first.Stop(t)

			var calls atomic.Int64
			crashed := make(chan struct{})
			node := startNode(t, conn, func(n *actor.Node) {
				n.SetCrash(func(p actor.CrashPoint, r records.Ref, seq uint64) bool {
					if p != point || calls.Add(1) != 300 {
						return false
					}
					close(crashed)
					return true
				})
			})
			publishIncs(t, conn, c1, 1000)
			select {
			case <-crashed:
			case <-time.After(time.Minute):
				t.Fatal("never crashed")
			}
			node.Stop(t)
			if got := count(t, c, c1); got >= 1000 {
				t.Fatalf("count %d before restart: the crash did not stop processing", got)
			}
			startNode(t, conn, nil)
			waitCount(t, conn, c, c1, 1000, time.Minute)
		})
	}
}

// TestCrashWithHighPriorityAhead crashes right after a high-priority record
// overtook waiting ones; on restart the waiting ones are processed and the
// high one is not applied again.
func TestCrashWithHighPriorityAhead(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	started, gate := make(chan struct{}, 1), make(chan struct{})
	var highSeq atomic.Uint64
	crashed := make(chan struct{})
	// One record per state write, so the crash falls right after the high
	// one's own commit (a batch would commit the waiting ones with it).
	gk := gateKind(started, gate)
	gk.MaxBatch = 1
	node := startNode(t, conn, func(n *actor.Node) {
		n.SetCrash(func(p actor.CrashPoint, r records.Ref, seq uint64) bool {
			if p == actor.AfterState && seq == highSeq.Load() {
				close(crashed)
				return true
			}
			return false
		})
	}, gk)
	c := newClient(t, conn)
	g := ref("gate", "g1")
	if _, err := c.Create(ctxT(t), g, nil); err != nil {
		t.Fatal(err)
	}
	sendLabel(t, c, g, "block", "block", false)
	<-started
	for i := range 5 {
		sendLabel(t, c, g, "item", fmt.Sprint("n", i), false)
	}
	rec, _ := records.New("item", "high")
	rec.Priority = records.PriorityHigh
	sent, err := c.Send(context.Background(), g, rec)
	if err != nil {
		t.Fatal(err)
	}
	highSeq.Store(sent.Seq)
	actortest.Eventually(t, 10*time.Second, "records held", func() bool {
		return metricSum(t, node.Registry, "ea_mailbox_backlog", "kind", "gate") == 6
	})
	close(gate)
	<-crashed
	node.Stop(t)
	s, doc := orderOf(t, c, g)
	if !slices.Equal(s.Order, []string{"block", "high"}) || !slices.Equal(doc.Ahead, []uint64{sent.Seq}) {
		t.Fatalf("at the crash: order %v ahead %v, want [block high] and [%d]", s.Order, doc.Ahead, sent.Seq)
	}
	startNode(t, conn, nil, gateKind(started, gate))
	want := []string{"block", "high", "n0", "n1", "n2", "n3", "n4"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, doc := orderOf(t, c, g)
		if len(s.Order) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: order %v, document %+v", s.Order, doc)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s, doc = orderOf(t, c, g)
	if !slices.Equal(s.Order, want) || len(doc.Ahead) != 0 {
		t.Fatalf("order %v ahead %v, want %v and none", s.Order, doc.Ahead, want)
	}
}

// slowCounter is a counter whose logic takes a millisecond, so a stop always
// lands in the middle of a load; it counts logic calls that saw their context
// cancelled.
func slowCounter(cancelled *atomic.Int64) actor.Kind[kinds.CounterState] {
	return actor.Kind[kinds.CounterState]{
		Name: "counter",
		Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				cancelled.Add(1)
				return s, ctx.Err()
			}
			s.Count++
			return s, ctx.Emit("count", kinds.Count{Count: s.Count})
		},
	}
}

// TestGracefulStopLosesNothing stops a node in the middle of a load and
// starts another: the record in hand finished (its logic was not cancelled),
// the count is exact, outputs unique.
func TestGracefulStopLosesNothing(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	c1 := ref("counter", "c1")
	var cancelled atomic.Int64
	node := startNode(t, conn, nil, slowCounter(&cancelled))
	if _, err := c.Create(ctxT(t), c1, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, c1, 2000)
	actortest.Eventually(t, time.Minute, "some processed", func() bool { return count(t, c, c1) >= 200 })
	node.Stop(t)
	if got := count(t, c, c1); got >= 2000 {
		t.Fatalf("all 2000 processed before the stop (count %d): the test proves nothing", got)
	}
	if n := cancelled.Load(); n != 0 {
		t.Fatalf("%d records in hand had their logic cancelled by a graceful stop", n)
	}
	startNode(t, conn, nil, slowCounter(&cancelled))
	waitCount(t, conn, c, c1, 2000, time.Minute)
}

// TestServerRestartUnderLoad restarts nats-server while records flow; the
// node reconnects, reads its partitions again and every count ends exact,
// well inside the ack wait.
func TestServerRestartUnderLoad(t *testing.T) {
	t.Parallel()
	srv, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	refs := []records.Ref{ref("counter", "a"), ref("counter", "b")}
	for _, r := range refs {
		if _, err := c.Create(ctxT(t), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range refs {
		publishIncs(t, conn, r, 1000)
	}
	actortest.Eventually(t, time.Minute, "some processed", func() bool { return count(t, c, refs[0]) >= 100 })
	srv.Restart(t)
	// Records the server sent just before it stopped may never have
	// arrived; the node reads its partitions again once reconnected, so
	// they come again at once, not after the ack wait (30 s: 2 runs in 8
	// stalled that long before).
	waitCounts(t, conn, c, refs, 1000, 15*time.Second)
}

// TestMoreThanThousandEffectors creates 1,100 effectors, more than the 1,000
// consumers nats-server allows a stream by default, and restarts the node
// over them: the mailbox stream keeps one consumer per partition.
func TestMoreThanThousandEffectors(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("slow")
	}
	_, conn := server(t)
	node := startNode(t, conn, nil)
	c := newClient(t, conn)
	const n = 1100
	refs := make([]records.Ref, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				refs[i] = ref("counter", fmt.Sprint("c", i))
				if _, err := c.Create(context.Background(), refs[i], nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	round := func(want int64) {
		for _, r := range refs {
			publishIncs(t, conn, r, 1)
		}
		waitCounts(t, conn, c, refs, want, time.Minute)
	}
	round(1)
	if got := metricSum(t, node.Registry, "ea_effectors_active", "kind", "counter"); got != n {
		t.Fatalf("ea_effectors_active = %v, want %d", got, n)
	}
	node.Stop(t)
	startNode(t, conn, nil)
	round(2)
	stream, err := conn.MailboxStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := conn.Names().Partitions()*2 + 2; info.State.Consumers != want {
		t.Fatalf("%d consumers on the mailbox stream, want %d (a partition consumer per kind and partition, and one <kind>~strays per kind)", info.State.Consumers, want)
	}
}

// TestSlowLogicShowsProcessing runs logic longer than the ack wait: the state
// shows PROCESSING meanwhile and the server is kept from redelivering.
func TestSlowLogicShowsProcessing(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	release := make(chan struct{})
	slow := actor.Kind[kinds.CounterState]{
		Name:    "slow",
		AckWait: time.Second,
		Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return s, ctx.Err()
			}
			s.Count++
			return s, nil
		},
	}
	node := startNode(t, conn, nil, slow)
	c := newClient(t, conn)
	r := ref("slow", "s1")
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, 1)
	actortest.Eventually(t, 10*time.Second, "status PROCESSING", func() bool {
		doc, err := c.State(context.Background(), r)
		return err == nil && doc.Status == actor.StatusProcessing
	})
	time.Sleep(2500 * time.Millisecond) // more than two ack waits
	close(release)
	actortest.Eventually(t, 10*time.Second, "status IDLE", func() bool {
		doc, err := c.State(context.Background(), r)
		return err == nil && doc.Status == actor.StatusIdle && doc.Seq > 0
	})
	if got := count(t, c, r); got != 1 {
		t.Fatalf("count %d, want 1", got)
	}
	if got := metricSum(t, node.Registry, "ea_record_redeliveries_total", "kind", "slow"); got != 0 {
		t.Fatalf("%v redeliveries: the ack deadline was not extended", got)
	}
}
