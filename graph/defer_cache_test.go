package graph_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/graph"
)

// TestDefer: the join d of a long branch (b1 -> b2) and a short one (c)
// runs once, after both, when deferred; twice when not.
func TestDefer(t *testing.T) {
	for _, deferred := range []bool{true, false} {
		b, f := newBuilder()
		for _, n := range []string{"a", "b1", "b2", "c"} {
			b.AddNode(n, logNode(f, n))
		}
		var opts []graph.NodeOption
		if deferred {
			opts = append(opts, graph.Defer())
		}
		b.AddNode("d", logNode(f, "d"), opts...)
		b.AddEdge(graph.START, "a").AddEdge("a", "b1").AddEdge("a", "c").AddEdge("b1", "b2")
		b.AddEdge("b2", "d").AddEdge("c", "d").AddEdge("d", graph.END)
		g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
		var steps [][]string
		for ev, err := range g.Stream(ctxT(t), "t", graph.Update[st]{}) {
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, ev.Nodes)
		}
		snap, err := g.State(ctxT(t), "t")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a", "b1", "c", "b2", "d"}
		if !deferred {
			want = []string{"a", "b1", "c", "b2", "d", "d"}
		}
		if !slices.Equal(snap.State.Log, want) {
			t.Fatalf("deferred=%v: log %v, want %v (steps %v)", deferred, snap.State.Log, want, steps)
		}
		if deferred && !slices.Equal(steps[len(steps)-1], []string{"d"}) {
			t.Fatalf("deferred: steps %v, want d alone last", steps)
		}
	}
}

// TestNodeCache: a cached node runs once per input key within its TTL; a
// hit reuses its writes and its routing.
func TestNodeCache(t *testing.T) {
	b, f := newBuilder()
	var runs atomic.Int32
	b.AddNode("slow", func(ctx context.Context, s st) (graph.Update[st], error) {
		runs.Add(1)
		return graph.Updates(f.total.Set(len(s.Item))).Goto("after"), nil
	}, graph.WithCachePolicy(graph.CachePolicy{Key: func(in any) string { return in.(st).Item }, TTL: time.Hour}))
	b.AddNode("after", logNode(f, "after"))
	b.AddNode("never", logNode(f, "never"))
	b.AddEdge(graph.START, "slow").AddEdge("slow", "never")
	cache := graph.NewMemoryCache()
	g := mustCompile(t, b, graph.WithCache(cache))
	ctx := ctxT(t)
	for _, item := range []string{"abc", "abc", "abcd"} {
		res, err := g.Invoke(ctx, "", graph.Replace(st{Item: item}))
		if err != nil || res.State.Total != len(item) || !slices.Equal(res.State.Log, []string{"after"}) {
			t.Fatalf("item %s: %+v, %v", item, res.State, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("runs %d, want 2 (two distinct items)", runs.Load())
	}
	// Another graph with the same cache hits it too.
	g2 := mustCompile(t, b, graph.WithCache(cache))
	if res, err := g2.Invoke(ctx, "", graph.Replace(st{Item: "abcd"})); err != nil || res.State.Total != 4 || runs.Load() != 2 {
		t.Fatalf("shared cache: %+v, %v, runs %d", res.State, err, runs.Load())
	}

	// An entry expires after its TTL.
	bt, ft := newBuilder()
	bt.AddNode("n", func(ctx context.Context, s st) (graph.Update[st], error) {
		runs.Add(1)
		return graph.Updates(ft.count.Set(1)), nil
	}, graph.WithCachePolicy(graph.CachePolicy{TTL: time.Millisecond}))
	bt.AddEdge(graph.START, "n")
	gt := mustCompile(t, bt)
	before := runs.Load()
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < before+2 {
		if time.Now().After(deadline) {
			t.Fatal("the cached entry never expired")
		}
		if _, err := gt.Invoke(ctx, "", graph.Update[st]{}); err != nil {
			t.Fatal(err)
		}
	}
	bn, _ := newBuilder()
	bn.AddNode("n", logNode(fields{}, "n"), graph.WithCachePolicy(graph.CachePolicy{TTL: -1})).AddEdge(graph.START, "n")
	if _, err := bn.Compile(); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("negative TTL: %v", err)
	}
	if _, err := bt.Compile(graph.WithCache(nil)); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("nil cache: %v", err)
	}
}
