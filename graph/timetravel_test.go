package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/effectors/effectors/graph"
)

func abcGraph(t *testing.T) (*graph.Graph[st], fields) {
	t.Helper()
	b, f := newBuilder()
	for _, n := range []string{"a", "b", "c"} {
		b.AddNode(n, logNode(f, n))
	}
	b.AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.END)
	return mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0))), f
}

// TestUpdateStateAsNode: an update as node a makes b the next step (a's
// edge), as LangGraph's update_state(values, as_node="a").
func TestUpdateStateAsNode(t *testing.T) {
	g, f := abcGraph(t)
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil {
		t.Fatal(err)
	}
	snap, err := g.UpdateState(ctx, "t", graph.Updates(f.log.Set([]string{"human"})), graph.AsNode("a"))
	if err != nil || !slices.Equal(snap.Next, []string{"b"}) {
		t.Fatalf("update as a: next %v, %v; want [b]", snap.Next, err)
	}
	res, err := g.Continue(ctx, "t")
	if want := []string{"a", "b", "c", "human", "b", "c"}; err != nil || !slices.Equal(res.State.Log, want) {
		t.Fatalf("continue: %v, %v; want %v", res.State.Log, err, want)
	}
	if _, err := g.UpdateState(ctx, "t", graph.Update[st]{}, graph.AsNode("nope")); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("unknown as-node: %v", err)
	}
	// As START: the update is an input; the next step is a.
	snap, err = g.UpdateState(ctx, "t", graph.Update[st]{}, graph.AsNode(graph.START))
	if err != nil || !slices.Equal(snap.Next, []string{"a"}) {
		t.Fatalf("as START: %v, %v", snap.Next, err)
	}
}

// TestUpdateStateGoto: a Goto in an update works on a finished thread (the
// next step is its target); a Goto to an unknown node is a typed error and
// writes nothing.
func TestUpdateStateGoto(t *testing.T) {
	g, f := abcGraph(t)
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil {
		t.Fatal(err)
	}
	before, err := g.State(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.UpdateState(ctx, "t", graph.Update[st]{}.Goto("zzz")); !errors.Is(err, graph.ErrInvalidUpdate) {
		t.Fatalf("goto unknown: %v", err)
	}
	if after, _ := g.State(ctx, "t"); after.Checkpoint.ID != before.Checkpoint.ID {
		t.Fatal("a failed update wrote a checkpoint")
	}
	snap, err := g.UpdateState(ctx, "t", graph.Updates(f.name.Set("x")).Goto("c"))
	if err != nil || !slices.Equal(snap.Next, []string{"c"}) {
		t.Fatalf("goto c: %v, %v", snap.Next, err)
	}
	res, err := g.Continue(ctx, "t")
	if err != nil || !slices.Equal(res.State.Log, []string{"a", "b", "c", "c"}) || res.State.Name != "x" {
		t.Fatalf("continue after goto: %+v, %v", res.State, err)
	}
	// A Send in an update runs its node with its state.
	if _, err := g.UpdateState(ctx, "t", graph.Update[st]{}.WithSends(graph.Send[st]{Node: "a", State: st{}})); err != nil {
		t.Fatal(err)
	}
	if res, err = g.Continue(ctx, "t"); err != nil || !slices.Equal(res.State.Log[len(res.State.Log)-3:], []string{"a", "b", "c"}) {
		t.Fatalf("continue after send: %+v, %v", res.State, err)
	}
}

// TestForkInOneCall: UpdateState At an old checkpoint edits it and makes
// the result the thread's head; its step follows the edited checkpoint's
// (LangGraph's, TestParitySteps).
func TestForkInOneCall(t *testing.T) {
	g, f := abcGraph(t)
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil {
		t.Fatal(err)
	}
	hist, err := g.History(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	afterA := hist[2] // input, a, b, c: newest first
	if !slices.Equal(afterA.Next, []string{"b"}) {
		t.Fatalf("checkpoint after a: next %v", afterA.Next)
	}
	snap, err := g.UpdateState(ctx, "t", graph.Updates(f.log.Set([]string{"edit"})), graph.At(afterA.Checkpoint.ID))
	if err != nil || snap.Checkpoint.ForkOf != "t/"+afterA.Checkpoint.ID || !slices.Equal(snap.Next, []string{"b"}) ||
		!slices.Equal(snap.State.Log, []string{"a", "edit"}) || snap.Checkpoint.Step != 2 {
		t.Fatalf("fork+edit: %+v, %v", snap, err)
	}
	res, err := g.Continue(ctx, "t")
	if err != nil || !slices.Equal(res.State.Log, []string{"a", "edit", "b", "c"}) {
		t.Fatalf("continue: %+v, %v", res.State, err)
	}
	// The thread's history is in Seq order; steps count along the branch.
	hist, err = g.History(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, h := range slices.Backward(hist) {
		steps = append(steps, fmt.Sprintf("%s:%d", h.Checkpoint.Source, h.Checkpoint.Step))
	}
	if want := []string{"input:0", "loop:1", "loop:2", "loop:3", "update:2", "loop:3", "loop:4"}; !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
}

// TestRouteErrorStep: a route to an unknown node names the step that ran.
func TestRouteErrorStep(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("a", logNode(f, "a"))
	b.AddNode("b", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Update[st]{}.Goto("ghost"), nil
	})
	b.AddEdge(graph.START, "a").AddEdge("a", "b")
	g := mustCompile(t, b)
	_, err := g.Invoke(ctxT(t), "", graph.Update[st]{})
	var ie *graph.InvalidUpdateError
	if !errors.As(err, &ie) || ie.Step != 2 {
		t.Fatalf("route error %v, want an InvalidUpdateError of step 2", err)
	}
}

type job struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// TestSendPayload: a node added with AddSendNode receives its Send's
// payload (not a state), also after a failure and Continue (the payload
// is checkpointed); a payload of another type is a typed error.
func TestSendPayload(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("plan", logNode(f, "plan"))
	var failOnce = true
	graph.AddSendNode(b, "do", func(ctx context.Context, j job) (graph.Update[st], error) {
		if j.ID == 2 && failOnce {
			failOnce = false
			return graph.Update[st]{}, errors.New("flaky")
		}
		return graph.Updates(f.log.Set([]string{j.Name}), f.total.Set(j.ID)), nil
	})
	b.AddEdge(graph.START, "plan")
	b.AddSends("plan", func(ctx context.Context, s st) ([]graph.Send[st], error) {
		if s.Name == "bad" {
			return []graph.Send[st]{graph.SendArg[st]("do", "not a job")}, nil
		}
		return []graph.Send[st]{graph.SendArg[st]("do", job{1, "one"}), graph.SendArg[st]("do", job{2, "two"})}, nil
	})
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("first run: %v", err)
	}
	res, err := g.Continue(ctx, "t")
	if err != nil || !slices.Equal(res.State.Log, []string{"plan", "one", "two"}) || res.State.Total != 3 {
		t.Fatalf("continue: %+v, %v", res.State, err)
	}
	if _, err := g.Invoke(ctx, "t2", graph.Updates(f.name.Set("bad"))); !errors.Is(err, graph.ErrInvalidUpdate) {
		t.Fatalf("payload of the wrong type: %v", err)
	}
	b2, f2 := newBuilder()
	graph.AddSendNode(b2, "do", func(ctx context.Context, j job) (graph.Update[st], error) { return graph.Update[st]{}, nil })
	b2.AddNode("a", logNode(f2, "a"))
	b2.AddEdge(graph.START, "a").AddEdge("a", "do")
	if _, err := mustCompile(t, b2).Invoke(ctx, "", graph.Update[st]{}); !errors.Is(err, graph.ErrInvalidUpdate) {
		t.Fatalf("edge to a send node: %v", err)
	}
}

// TestBreakpoints: static breakpoints before b and after a pause the run;
// Continue goes on (after an edit); without a checkpointer a breakpoint is
// ErrNoCheckpointer; unknown nodes are Compile errors.
func TestBreakpoints(t *testing.T) {
	build := func(before, after []string, opts ...graph.Option) (*graph.Graph[st], fields) {
		b, f := newBuilder()
		for _, n := range []string{"a", "b", "c"} {
			b.AddNode(n, logNode(f, n))
		}
		b.AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c")
		return mustCompile(t, b, append(opts, graph.WithBreakpoints(before, after))...), f
	}
	ctx := ctxT(t)
	g, f := build([]string{"b"}, nil, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	res, err := g.Invoke(ctx, "t", graph.Update[st]{})
	if err != nil || res.Breakpoint != "b" || !res.Paused() || res.Interrupted() || !slices.Equal(res.State.Log, []string{"a"}) {
		t.Fatalf("before b: %+v, %v", res, err)
	}
	if _, err := g.UpdateState(ctx, "t", graph.Updates(f.log.Set([]string{"edit"}))); err != nil {
		t.Fatal(err)
	}
	res, err = g.Continue(ctx, "t")
	if err != nil || res.Paused() || !slices.Equal(res.State.Log, []string{"a", "edit", "b", "c"}) {
		t.Fatalf("continue: %+v, %v", res, err)
	}

	g, _ = build(nil, []string{"a"}, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	var last graph.Event[st]
	for ev, err := range g.Stream(ctx, "t", graph.Update[st]{}) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Breakpoint != "a" || !slices.Equal(last.State.Log, []string{"a"}) {
		t.Fatalf("after a: last event %+v", last)
	}
	if res, err = g.Continue(ctx, "t"); err != nil || !slices.Equal(res.State.Log, []string{"a", "b", "c"}) {
		t.Fatalf("continue after a: %+v, %v", res, err)
	}

	g, _ = build([]string{"a"}, nil)
	if _, err := g.Invoke(ctx, "", graph.Update[st]{}); !errors.Is(err, graph.ErrNoCheckpointer) {
		t.Fatalf("breakpoint without a checkpointer: %v", err)
	}
	b, _ := newBuilder()
	b.AddNode("a", logNode(fields{}, "a")).AddEdge(graph.START, "a")
	if _, err := b.Compile(graph.WithBreakpoints([]string{"ghost"}, nil)); !errors.Is(err, graph.ErrInvalidGraph) {
		t.Fatalf("unknown breakpoint: %v", err)
	}
}

// TestPendingSendPayload: a node's Sends with payloads are kept in the
// pending writes of a step where a sibling failed, and run after Continue.
func TestPendingSendPayload(t *testing.T) {
	b, f := newBuilder()
	failOnce := true
	b.AddNode("plan", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Update[st]{}.WithSends(graph.SendArg[st]("do", job{7, "seven"}), graph.Send[st]{Node: "plain", State: st{Item: "x"}}), nil
	})
	b.AddNode("flaky", func(ctx context.Context, s st) (graph.Update[st], error) {
		if failOnce {
			failOnce = false
			return graph.Update[st]{}, errors.New("flaky")
		}
		return graph.Updates(f.log.Set([]string{"flaky"})), nil
	})
	graph.AddSendNode(b, "do", func(ctx context.Context, j job) (graph.Update[st], error) {
		return graph.Updates(f.log.Set([]string{j.Name})), nil
	})
	b.AddNode("plain", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f.log.Set([]string{"plain " + s.Item})), nil
	})
	b.AddEdge(graph.START, "plan").AddEdge(graph.START, "flaky")
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("first run: %v", err)
	}
	res, err := g.Continue(ctx, "t")
	if err != nil || !slices.Equal(res.State.Log, []string{"flaky", "seven", "plain x"}) {
		t.Fatalf("continue: %+v, %v", res.State, err)
	}
}
