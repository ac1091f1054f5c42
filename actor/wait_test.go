package actor_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

func TestWaitReady(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	n, err := actor.NewNode(conn, actor.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Host(kinds.Counter()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	if err := n.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !n.Ready() {
		t.Fatal("WaitReady returned but Ready is false")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := n.WaitReady(ctxT(t)); err != nil {
		t.Fatalf("WaitReady after a ready node stopped: %v (it was ready)", err)
	}

	// A node that stops before it is ready: WaitReady says so.
	early, err := actor.NewNode(conn, actor.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := early.Host(kinds.Counter()); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	go func() { done <- early.Run(stopped) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	err = early.WaitReady(wctx)
	<-done
	if err != nil && !errors.Is(err, actor.ErrNotRunning) {
		t.Fatalf("WaitReady on a node stopped at once = %v, want nil or ErrNotRunning", err)
	}
}

// TestStateAt: the state read after an output may predate its record;
// StateAt waits until the record sent is applied.
func TestStateAt(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	c1 := ref("counter", "c1")
	if _, err := c.Create(ctxT(t), c1, nil); err != nil {
		t.Fatal(err)
	}
	var last records.Record
	for range 50 {
		rec, err := records.New("inc", nil)
		if err != nil {
			t.Fatal(err)
		}
		if last, err = c.Send(ctxT(t), c1, rec); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := c.StateAt(ctxT(t), c1, last.Seq)
	if err != nil {
		t.Fatal(err)
	}
	var s kinds.CounterState
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Count != 50 || doc.Seq < last.Seq {
		t.Fatalf("StateAt(%d) = count %d seq %d; want 50 at or after %d", last.Seq, s.Count, doc.Seq, last.Seq)
	}
	if _, err := c.Terminate(ctxT(t), c1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StateAt(ctxT(t), c1, last.Seq+1_000_000); !errors.Is(err, actor.ErrTerminated) {
		t.Fatalf("StateAt beyond a terminated effector = %v, want ErrTerminated", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.StateAt(short, ref("counter", "ghost"), 1); !errors.Is(err, actor.ErrNotFound) {
		t.Fatalf("StateAt of an effector never created = %v, want ErrNotFound", err)
	}
}

// TestSubscribeKind: one subscription follows the outputs of every effector
// of a kind.
func TestSubscribeKind(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	if _, err := c.SubscribeKind(ctxT(t), "no.t"); !errors.Is(err, actor.ErrInvalid) {
		t.Fatalf("SubscribeKind(no.t) = %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	sub, err := c.SubscribeKind(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	refs := createCounters(t, c, 5)
	publishAll(t, conn, refs, 2)
	from := map[string]int{}
	for rec, err := range sub {
		if err != nil {
			t.Fatal(err)
		}
		from[rec.From.ID]++
		if len(from) == 5 && from["c0"]+from["c1"]+from["c2"]+from["c3"]+from["c4"] == 10 {
			break
		}
	}
	for _, r := range refs {
		if from[r.ID] != 2 {
			t.Fatalf("outputs by effector %v, want 2 from each", from)
		}
	}
}
