package actortest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartNode starts a node hosting the counter, has it apply a record,
// reads its metrics and stops it twice.
func TestStartNode(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	n := actortest.StartNode(t, conn, actor.Options{}, kinds.Counter())
	if !n.Ready() {
		t.Fatal("node not ready after StartNode")
	}
	if got := n.Kinds(); len(got) != 1 || got[0] != "counter" {
		t.Fatalf("kinds = %v, want [counter]", got)
	}
	if n.Registry == nil {
		t.Fatal("no registry")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	r := records.Ref{Kind: "counter", ID: "c1"}
	if _, err := c.Create(ctx, r, kinds.CounterState{Count: 1}); err != nil {
		t.Fatal(err)
	}
	rec, err := records.New("inc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, r, rec); err != nil {
		t.Fatal(err)
	}
	var count int64
	actortest.Eventually(t, 30*time.Second, "count 2", func() bool {
		doc, err := c.State(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var s kinds.CounterState
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		count = s.Count
		return count == 2
	})
	families, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) == 0 {
		t.Fatal("the registry holds no metrics of the node")
	}

	n.Stop(t)
	if n.Ready() {
		t.Fatal("node ready after Stop")
	}
	n.Stop(t) // a second Stop, and the one at cleanup, do nothing
}

// fakeT records Fatalf and ends the goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// TestEventually checks that Eventually returns once cond holds and fails
// with the timeout and what when it never does.
func TestEventually(t *testing.T) {
	calls := 0
	actortest.Eventually(t, time.Second, "third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}

	f := &fakeT{TB: t}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		actortest.Eventually(f, 50*time.Millisecond, "nothing", func() bool { return false })
	}()
	<-done
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %s, before the timeout", took)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := "timed out after 50ms waiting for nothing"; f.fatal != want {
		t.Fatalf("fatal = %q, want %q", f.fatal, want)
	}
}

// TestCreate: an effector made with Create is live during the test (and its
// subtest) and terminated when the (sub)test ends.
func TestCreate(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	actortest.StartNode(t, conn, actor.Options{}, kinds.Counter())
	c, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	r := records.Ref{Kind: "counter", ID: "temp"}
	t.Run("uses it", func(t *testing.T) {
		doc := actortest.Create(t, c, r, kinds.CounterState{Count: 4})
		if doc.Status != actor.StatusIdle || doc.Ref() != r {
			t.Fatalf("created %+v", doc)
		}
	})
	doc, err := c.State(context.Background(), r)
	if err != nil || doc.Status != actor.StatusTerminated {
		t.Fatalf("after the subtest: %+v %v, want TERMINATED", doc, err)
	}
}
