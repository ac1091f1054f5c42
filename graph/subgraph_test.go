package graph_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/effectors/effectors/graph"
)

type inner struct {
	Steps []string `json:"steps"`
	Who   string   `json:"who"`
}

// childGraph: prep -> ask -> done. ask asks "who?"; failDone makes done
// fail once.
func childGraph(t *testing.T, prepRuns *atomic.Int32, failDone *atomic.Bool) *graph.Graph[inner] {
	t.Helper()
	b := graph.New[inner]()
	steps := graph.Reduced(b, "steps", func(s *inner) *[]string { return &s.Steps }, graph.Append[string])
	who := graph.Plain(b, "who", func(s *inner) *string { return &s.Who })
	b.AddNode("prep", func(ctx context.Context, s inner) (graph.Update[inner], error) {
		prepRuns.Add(1)
		graph.WriteCustom(ctx, "prep ran")
		return graph.Updates(steps.Set([]string{"prep"})), nil
	})
	b.AddNode("ask", func(ctx context.Context, s inner) (graph.Update[inner], error) {
		w, err := graph.Ask[string](ctx, "who?")
		if err != nil {
			return graph.Update[inner]{}, err
		}
		return graph.Updates(who.Set(w), steps.Set([]string{"ask"})), nil
	})
	b.AddNode("done", func(ctx context.Context, s inner) (graph.Update[inner], error) {
		if failDone != nil && failDone.CompareAndSwap(true, false) {
			return graph.Update[inner]{}, errors.New("child crashed")
		}
		return graph.Updates(steps.Set([]string{"done"})), nil
	})
	b.AddEdge(graph.START, "prep").AddEdge("prep", "ask").AddEdge("ask", "done").AddEdge("done", graph.END)
	g, err := b.Compile() // no checkpointer: it runs in its parent's
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// parentGraph: start -> sub (the child, mapped) -> end.
func parentGraph(t *testing.T, child *graph.Graph[inner], saver graph.Checkpointer) *graph.Graph[st] {
	t.Helper()
	b, f := newBuilder()
	b.AddNode("start", logNode(f, "start"))
	graph.AddSubgraphFunc(b, "sub", child,
		func(s st) inner { return inner{Steps: []string{"from " + s.Name}} },
		func(c inner) graph.Update[st] {
			return graph.Updates(f.name.Set(c.Who), f.log.Set(c.Steps))
		})
	b.AddNode("end", logNode(f, "end"))
	b.AddEdge(graph.START, "start").AddEdge("start", "sub").AddEdge("sub", "end").AddEdge("end", graph.END)
	opts := []graph.Option{}
	if saver != nil {
		opts = append(opts, graph.WithCheckpointer(saver))
	}
	return mustCompile(t, b, opts...)
}

// TestSubgraphInterrupt: an interrupt inside a subgraph surfaces to the
// parent with its namespace; resuming the parent by the interrupt's id
// continues the child where it paused (prep not run again); the child's
// checkpoints are in its own thread of the parent's checkpointer.
func TestSubgraphInterrupt(t *testing.T) {
	var prepRuns atomic.Int32
	child := childGraph(t, &prepRuns, nil)
	saver := graph.NewMemorySaver(0)
	g := parentGraph(t, child, saver)
	ctx := ctxT(t)

	res, err := g.Invoke(ctx, "p", graph.Update[st]{})
	if err != nil || len(res.Interrupts) != 1 {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	in := res.Interrupts[0]
	var q string
	if err := in.Decode(&q); err != nil || q != "who?" || in.Node != "sub" || !strings.HasPrefix(in.Namespace, "sub:") {
		t.Fatalf("surfaced interrupt %+v (%q), %v", in, q, err)
	}
	snap, err := g.State(ctx, "p")
	if err != nil || len(snap.Tasks) != 1 || snap.Tasks[0].Thread == "" {
		t.Fatalf("parent state %+v, %v", snap.Tasks, err)
	}
	childThread := snap.Tasks[0].Thread
	if childThread != graph.SubgraphThread(in.Task) {
		t.Fatalf("child thread %q, want SubgraphThread(%q)", childThread, in.Task)
	}
	cs, err := child.State(ctx, childThread, graph.UsingCheckpointer(saver))
	if err != nil || !slices.Equal(cs.Next, []string{"ask"}) || len(cs.Interrupts) != 1 || cs.Interrupts[0].ID != in.ID {
		t.Fatalf("child state %+v next %v, %v", cs.State, cs.Next, err)
	}
	if _, err := child.State(ctx, childThread); !errors.Is(err, graph.ErrNoCheckpointer) {
		t.Fatalf("child state without the parent's checkpointer: %v", err)
	}

	res, err = g.ResumeEach(ctx, "p", map[string]any{in.ID: "Grace"})
	if err != nil || res.Interrupted() {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if want := []string{"start", "from ", "prep", "ask", "done", "end"}; !slices.Equal(res.State.Log, want) || res.State.Name != "Grace" {
		t.Fatalf("final %+v, want log %v", res.State, want)
	}
	if prepRuns.Load() != 1 {
		t.Fatalf("child's prep ran %d times, want 1", prepRuns.Load())
	}
	hist, err := child.History(ctx, childThread, 0, graph.UsingCheckpointer(saver))
	if err != nil || len(hist) < 4 || len(hist[0].Next) != 0 {
		t.Fatalf("child history: %d, %v", len(hist), err)
	}
}

// TestSubgraphCrash: a node of the child fails; the parent's Continue
// continues the child's thread (its completed nodes are not run again).
func TestSubgraphCrash(t *testing.T) {
	var prepRuns atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	child := childGraph(t, &prepRuns, &fail)
	g := parentGraph(t, child, graph.NewMemorySaver(0))
	ctx := ctxT(t)
	res, err := g.Invoke(ctx, "p", graph.Updates[st]())
	if err != nil || !res.Interrupted() {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	_, err = g.Resume(ctx, "p", "Lin")
	var ne *graph.NodeError
	if !errors.As(err, &ne) || ne.Node != "sub" || !strings.Contains(err.Error(), "child crashed") {
		t.Fatalf("resume: %v, want the sub node's failure", err)
	}
	res, err = g.Continue(ctx, "p")
	if err != nil || res.State.Name != "Lin" || !slices.Contains(res.State.Log, "done") {
		t.Fatalf("continue: %+v, %v", res, err)
	}
	if prepRuns.Load() != 1 {
		t.Fatalf("prep ran %d times, want 1", prepRuns.Load())
	}
}

// TestSubgraphSharedState: AddSubgraph with the parent's own state type;
// without a checkpointer the child runs in memory.
func TestSubgraphSharedState(t *testing.T) {
	cb, cf := newBuilder()
	cb.AddNode("double", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(cf.count.Set(s.Count*2), cf.log.Set([]string{"double"})), nil
	})
	cb.AddEdge(graph.START, "double")
	child := mustCompile(t, cb)

	b, f := newBuilder()
	b.AddNode("inc", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f.count.Set(s.Count + 1)), nil
	})
	graph.AddSubgraph(b, "sub", child)
	b.AddEdge(graph.START, "inc").AddEdge("inc", "sub").AddEdge("sub", graph.END)
	for _, saver := range []graph.Checkpointer{nil, graph.NewMemorySaver(0)} {
		var opts []graph.Option
		thread := ""
		if saver != nil {
			opts, thread = append(opts, graph.WithCheckpointer(saver)), "s"
		}
		g := mustCompile(t, b, opts...)
		res, err := g.Invoke(ctxT(t), thread, graph.Updates(f.count.Set(4)))
		if err != nil || res.State.Count != 10 || !slices.Equal(res.State.Log, []string{"double"}) {
			t.Fatalf("saver %v: %+v, %v", saver != nil, res, err)
		}
	}
	if _, err := graph.AddSubgraph[st](graph.New[st](), "x", nil).Compile(); !errors.Is(err, graph.ErrInvalidGraph) {
		t.Fatalf("nil child: %v", err)
	}
	if th := graph.SubgraphThread(strings.Repeat("x", 200) + ":1:0"); len(th) > 128 {
		t.Fatalf("long subgraph thread %q", th)
	}
}

// TestSubgraphStore: a subgraph compiled without a store uses its
// parent's.
func TestSubgraphStore(t *testing.T) {
	store := graph.NewMemoryStore(nil)
	cb, cf := newBuilder()
	cb.AddNode("recall", func(ctx context.Context, s st) (graph.Update[st], error) {
		mem, ok := graph.StoreOf(ctx)
		if !ok {
			return graph.Update[st]{}, errors.New("no store in the subgraph")
		}
		it, err := mem.Get(ctx, []string{"facts"}, "name")
		if err != nil {
			return graph.Update[st]{}, err
		}
		var name string
		if err := it.Decode(&name); err != nil {
			return graph.Update[st]{}, err
		}
		return graph.Updates(cf.name.Set(name)), nil
	})
	cb.AddEdge(graph.START, "recall")
	child := mustCompile(t, cb)
	b, _ := newBuilder()
	graph.AddSubgraph(b, "sub", child)
	b.AddEdge(graph.START, "sub")
	g := mustCompile(t, b, graph.WithStore(store))
	ctx := ctxT(t)
	if err := store.Put(ctx, []string{"facts"}, "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	res, err := g.Invoke(ctx, "", graph.Update[st]{})
	if err != nil || res.State.Name != "Ada" {
		t.Fatalf("%+v, %v", res.State, err)
	}
	if _, err := child.Invoke(ctx, "", graph.Update[st]{}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Fatalf("child alone: %v", err)
	}
}

// TestForkPausedSubgraph: forking a checkpoint where a subgraph waits
// starts the subgraph afresh in the fork: its question is asked again.
func TestForkPausedSubgraph(t *testing.T) {
	var prepRuns atomic.Int32
	child := childGraph(t, &prepRuns, nil)
	g := parentGraph(t, child, graph.NewMemorySaver(0))
	ctx := ctxT(t)
	res, err := g.Invoke(ctx, "p", graph.Update[st]{})
	if err != nil || !res.Interrupted() {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	if _, err := g.Fork(ctx, "p", res.Checkpoint, "p2"); err != nil {
		t.Fatal(err)
	}
	res2, err := g.Resume(ctx, "p2", "ignored")
	if err != nil || !res2.Interrupted() || res2.Interrupts[0].ID == res.Interrupts[0].ID || prepRuns.Load() != 2 {
		t.Fatalf("resume of the fork: %+v, %v, prep ran %d times", res2, err, prepRuns.Load())
	}
	if res2, err = g.Resume(ctx, "p2", "Kim"); err != nil || res2.State.Name != "Kim" {
		t.Fatalf("second resume of the fork: %+v, %v", res2.State, err)
	}
	// The original thread still resumes where it paused.
	if res, err = g.Resume(ctx, "p", "Ada"); err != nil || res.State.Name != "Ada" || prepRuns.Load() != 2 {
		t.Fatalf("original: %+v, %v", res.State, err)
	}
}
