package graph_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/effectors/effectors/graph"
)

// TestAskSeveral: a node asks two questions; each Resume re-runs it from
// its start and its Ask calls get the inputs by call order.
func TestAskSeveral(t *testing.T) {
	b, f := newBuilder()
	var runs atomic.Int32
	b.AddNode("form", func(ctx context.Context, s st) (graph.Update[st], error) {
		runs.Add(1)
		name, err := graph.Ask[string](ctx, "name?")
		if err != nil {
			return graph.Update[st]{}, err
		}
		age, err := graph.Ask[int](ctx, "age of "+name+"?")
		if err != nil {
			return graph.Update[st]{}, err
		}
		return graph.Updates(f.name.Set(name), f.count.Set(age)), nil
	})
	b.AddEdge(graph.START, "form").AddEdge("form", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)

	res, err := g.Invoke(ctx, "t", graph.Update[st]{})
	if err != nil || len(res.Interrupts) != 1 {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	first := res.Interrupts[0]
	var q string
	if err := first.Decode(&q); err != nil || q != "name?" || first.Index != 0 || first.ID == "" {
		t.Fatalf("first interrupt %+v (%q), %v", first, q, err)
	}
	res, err = g.Resume(ctx, "t", "Ada")
	if err != nil || len(res.Interrupts) != 1 {
		t.Fatalf("first resume: %+v, %v", res, err)
	}
	second := res.Interrupts[0]
	if err := second.Decode(&q); err != nil || q != "age of Ada?" || second.Index != 1 || second.ID == first.ID || second.Task != first.Task {
		t.Fatalf("second interrupt %+v (%q), %v; want the second question with index 1 and a new id", second, q, err)
	}
	// Resume by id.
	res, err = g.ResumeEach(ctx, "t", map[string]any{second.ID: 36})
	if err != nil || res.Interrupted() || res.State.Name != "Ada" || res.State.Count != 36 {
		t.Fatalf("second resume: %+v, %v", res, err)
	}
	if runs.Load() != 3 {
		t.Fatalf("node ran %d times, want 3 (from its start on each resume)", runs.Load())
	}

	// An input of the wrong type is an ErrInvalidArgument failure of the node.
	if res, err := g.Invoke(ctx, "t2", graph.Update[st]{}); err != nil || !res.Interrupted() {
		t.Fatalf("t2: %+v, %v", res, err)
	}
	if _, err := g.Resume(ctx, "t2", []int{1}); !errors.Is(err, graph.ErrInvalidArgument) || !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("wrong input type: %v", err)
	}
	if _, err := graph.Ask[string](ctx, "outside"); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("Ask outside a node: %v", err)
	}
}

// TestAskParallelByID: two nodes of one step ask at once; each is resumed
// by its interrupt id (ForInterrupt, ResumeEach); an unknown id and an
// input for a completed interrupt are typed errors.
func TestAskParallelByID(t *testing.T) {
	b, f := newBuilder()
	for _, n := range []string{"x", "y"} {
		b.AddNode(n, func(ctx context.Context, s st) (graph.Update[st], error) {
			a, err := graph.Ask[string](ctx, n+"?")
			if err != nil {
				return graph.Update[st]{}, err
			}
			return graph.Updates(f.log.Set([]string{n + "=" + a})), nil
		})
		b.AddEdge(graph.START, n).AddEdge(n, graph.END)
	}
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	res, err := g.Invoke(ctx, "t", graph.Update[st]{})
	if err != nil || len(res.Interrupts) != 2 {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	ids := map[string]string{}
	for _, in := range res.Interrupts {
		ids[in.Node] = in.ID
	}
	if _, err := g.Resume(ctx, "t", "no", graph.ForInterrupt("t:9:9#0")); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("unknown id: %v", err)
	}
	res, err = g.Resume(ctx, "t", "2", graph.ForInterrupt(ids["y"]))
	if err != nil || len(res.Interrupts) != 1 || res.Interrupts[0].ID != ids["x"] {
		t.Fatalf("after resuming y: %+v, %v; want x still waiting", res, err)
	}
	// y completed: its interrupt is no longer pending.
	if _, err := g.ResumeEach(ctx, "t", map[string]any{ids["y"]: "again"}); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("second input for y: %v", err)
	}
	res, err = g.ResumeEach(ctx, "t", map[string]any{ids["x"]: "1"})
	if err != nil || !slices.Equal(res.State.Log, []string{"x=1", "y=2"}) {
		t.Fatalf("after resuming x: %+v, %v", res, err)
	}
}

// TestInterruptErrorForm: the error form (Interrupt + ResumeInput) still
// works, and a legacy node asking a second question gets a new interrupt
// with the next index.
func TestInterruptErrorForm(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("n", func(ctx context.Context, s st) (graph.Update[st], error) {
		var a string
		ok, err := graph.ResumeInput(ctx, &a)
		if err != nil {
			return graph.Update[st]{}, err
		}
		if !ok {
			return graph.Update[st]{}, graph.Interrupt("q1")
		}
		if a == "more" {
			return graph.Update[st]{}, graph.Interrupt("q2")
		}
		return graph.Updates(f.name.Set(a)), nil
	})
	b.AddEdge(graph.START, "n")
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil {
		t.Fatal(err)
	}
	res, err := g.Resume(ctx, "t", "more")
	if err != nil || len(res.Interrupts) != 1 || res.Interrupts[0].Index != 1 {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	res, err = g.Resume(ctx, "t", "done")
	if err != nil || res.State.Name != "done" {
		t.Fatalf("resume 2: %+v, %v", res, err)
	}
}
