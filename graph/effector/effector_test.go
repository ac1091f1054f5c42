package effector_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/effector"
	"github.com/effectors/effectors/records"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type acc struct {
	Total int      `json:"total"`
	Seen  []string `json:"seen"`
}

type inc struct {
	By   int    `json:"by"`
	Mode string `json:"mode"`
}

// accGraph: START -> add, note (in parallel) -> END. add sums the payload's
// by; note appends a line and emits a record. Mode "fail" makes add fail,
// "panic" makes note panic, "wait" interrupts.
func accGraph(t testing.TB) *graph.Graph[acc] {
	t.Helper()
	b := graph.New[acc]()
	total := graph.Reduced(b, "total", func(s *acc) *int { return &s.Total }, graph.Sum[int])
	seen := graph.Reduced(b, "seen", func(s *acc) *[]string { return &s.Seen }, graph.Append[string])
	b.AddNode("add", func(ctx context.Context, s acc) (graph.Update[acc], error) {
		var in inc
		if err := effector.Decode(ctx, &in); err != nil {
			return graph.Update[acc]{}, err
		}
		switch in.Mode {
		case "fail":
			return graph.Update[acc]{}, errors.New("add refuses")
		case "wait":
			return graph.Update[acc]{}, graph.Interrupt("more?")
		}
		if err := effector.Emit(ctx, "added", inc{By: in.By}); err != nil {
			return graph.Update[acc]{}, err
		}
		return graph.Updates(total.Set(in.By)), nil
	})
	b.AddNode("note", func(ctx context.Context, s acc) (graph.Update[acc], error) {
		var in inc
		if err := effector.Decode(ctx, &in); err != nil {
			return graph.Update[acc]{}, err
		}
		if in.Mode == "panic" {
			panic("note exploded")
		}
		rec, _ := effector.Record(ctx)
		self, _ := effector.Self(ctx)
		if err := effector.Emit(ctx, "noted", map[string]string{"type": rec.Type, "self": self.String()}); err != nil {
			return graph.Update[acc]{}, err
		}
		return graph.Updates(seen.Set([]string{rec.Type})), nil
	})
	b.AddEdge(graph.START, "add").AddEdge(graph.START, "note")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGraphEffectorOnNode(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	kind, err := effector.Kind(actor.Kind[acc]{
		Name:  "acc",
		Retry: actor.RetryPolicy{Attempts: 2, Backoff: 10 * time.Millisecond},
	}, accGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, conn, actor.Options{}, kind)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	ref := records.Ref{Kind: "acc", ID: "a1"}
	if _, err := client.Create(ctx, ref, acc{Total: 100}); err != nil {
		t.Fatal(err)
	}
	send := func(typ string, in inc) {
		t.Helper()
		rec, err := records.New(typ, in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Send(ctx, ref, rec); err != nil {
			t.Fatal(err)
		}
	}
	doc := func() (actor.Document, acc) {
		d, err := client.State(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		var s acc
		if err := d.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return d, s
	}
	waitFor := func(what string, cond func(actor.Document, acc) bool) (actor.Document, acc) {
		t.Helper()
		var d actor.Document
		var s acc
		actortest.Eventually(t, 30*time.Second, what, func() bool { d, s = doc(); return cond(d, s) })
		return d, s
	}

	send("inc", inc{By: 2})
	send("inc", inc{By: 3})
	_, s := waitFor("two records applied", func(d actor.Document, s acc) bool { return len(s.Seen) == 2 })
	if s.Total != 105 || !slices.Equal(s.Seen, []string{"inc", "inc"}) {
		t.Fatalf("state %+v, want total 105", s)
	}

	// A node error: retried by the runtime, then dead-lettered; the
	// document shows the error; the effector goes on with the next record.
	cases := []struct{ mode, want string }{
		{"fail", "add refuses"},
		{"panic", "note exploded"},
		{"wait", "interrupted"},
	}
	for _, tc := range cases {
		send("bad", inc{By: 1000, Mode: tc.mode})
		d, s := waitFor("error of mode "+tc.mode, func(d actor.Document, s acc) bool {
			return d.Status == actor.StatusError && strings.Contains(d.Error, tc.want)
		})
		if s.Total != 105 {
			t.Fatalf("mode %s changed the state: %+v (%s)", tc.mode, s, d.Error)
		}
		send("inc", inc{By: 1})
		waitFor("recovery after "+tc.mode, func(d actor.Document, s acc) bool {
			return d.Status == actor.StatusIdle && s.Total == 106
		})
		send("inc", inc{By: -1}) // back to 105 for the next case
		waitFor("reset", func(d actor.Document, s acc) bool { return s.Total == 105 })
	}

	// The outbox holds the emitted records in graph order, each once.
	recs, err := client.Subscribe(ctx, ref, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, rec.Type)
		if len(types) == 2*(2+2*len(cases)) {
			break
		}
	}
	for i := 0; i < len(types); i += 2 {
		if types[i] != "added" || types[i+1] != "noted" {
			t.Fatalf("outbox %v: want added, noted pairs in node order", types)
		}
	}

	// The event-sourcing check: the graph replayed over the mailbox, the
	// three bad records skipped as the live run dead-lettered them, gives
	// the stored state (created with a state of its own, still in the
	// document's history or given).
	rep, err := client.Replay(ctx, ref, actor.ReplayFrom([]byte(`{"total": 100}`)))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal || rep.Skipped != len(cases) || rep.Applied != 2+2*len(cases) {
		t.Fatalf("replay: %+v", rep)
	}
}

func TestKindErrors(t *testing.T) {
	t.Parallel()
	g := accGraph(t)
	if _, err := effector.Kind(actor.Kind[acc]{Name: "x"}, nil); !errors.Is(err, effector.ErrInvalid) {
		t.Fatalf("nil graph: %v", err)
	}
	logic := func(*actor.Context, acc) (acc, error) { return acc{}, nil }
	if _, err := effector.Kind(actor.Kind[acc]{Name: "x", Logic: logic}, g); !errors.Is(err, effector.ErrInvalid) {
		t.Fatalf("kind with logic: %v", err)
	}
	b := graph.New[acc]()
	b.AddNode("n", func(context.Context, acc) (graph.Update[acc], error) { return graph.Update[acc]{}, nil }).AddEdge(graph.START, "n")
	gc, err := b.Compile(graph.WithCheckpointer(graph.NewMemorySaver(0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := effector.Kind(actor.Kind[acc]{Name: "x"}, gc); !errors.Is(err, effector.ErrInvalid) {
		t.Fatalf("graph with checkpointer: %v", err)
	}
	if _, ok := effector.Record(context.Background()); ok {
		t.Fatal("Record outside a run")
	}
	if err := effector.Emit(context.Background(), "x", nil); !errors.Is(err, effector.ErrNoRecord) {
		t.Fatalf("Emit outside a run: %v", err)
	}
}

// TestApply runs the kind without NATS through actor.Kind.Apply.
func TestApply(t *testing.T) {
	t.Parallel()
	kind, err := effector.Kind(actor.Kind[acc]{Name: "acc"}, accGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New("inc", inc{By: 4})
	if err != nil {
		t.Fatal(err)
	}
	next, outs, err := kind.Apply(context.Background(), records.Ref{Kind: "acc", ID: "x"}, rec, acc{Total: 1})
	if err != nil || next.Total != 5 || len(outs) != 2 {
		t.Fatalf("Apply: %+v, %d outputs, %v", next, len(outs), err)
	}
	rec, _ = records.New("inc", inc{Mode: "panic"})
	if _, _, err := kind.Apply(context.Background(), records.Ref{Kind: "acc", ID: "x"}, rec, acc{}); !actor.IsPermanent(err) {
		t.Fatalf("panic: %v, want a permanent error", err)
	}
}
