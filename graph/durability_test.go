package graph_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/effectors/effectors/graph"
)

// countingSaver counts the checkpoints written.
type countingSaver struct {
	*graph.MemorySaver
	puts atomic.Int32
}

func (c *countingSaver) Put(ctx context.Context, cp graph.Checkpoint, head uint64) (uint64, error) {
	c.puts.Add(1)
	return c.MemorySaver.Put(ctx, cp, head)
}

// TestDurability: sync and async write a checkpoint per step (async while
// the next step runs), exit only at the end of the run — also when a node
// fails (the partial step) and when the context ends; each finishes with
// the same state and can be continued.
func TestDurability(t *testing.T) {
	const n = 6
	build := func(d graph.Durability, saver graph.Checkpointer, fail *atomic.Bool, cancel func()) *graph.Graph[st] {
		b, f := newBuilder()
		prev := graph.START
		for i := range n {
			name := fmt.Sprintf("n%d", i)
			b.AddNode(name, func(ctx context.Context, s st) (graph.Update[st], error) {
				if i == 3 && fail != nil && fail.CompareAndSwap(true, false) {
					return graph.Update[st]{}, errors.New("fails once")
				}
				if i == 3 && cancel != nil {
					cancel()
				}
				return graph.Updates(f.count.Set(s.Count + 1)), nil
			})
			b.AddEdge(prev, name)
			prev = name
		}
		return mustCompile(t, b, graph.WithCheckpointer(saver), graph.WithDurability(d))
	}
	ctx := ctxT(t)
	for _, tc := range []struct {
		d    graph.Durability
		puts int32
	}{{graph.DurabilitySync, n + 1}, {graph.DurabilityAsync, n + 1}, {graph.DurabilityExit, 1}} {
		saver := &countingSaver{MemorySaver: graph.NewMemorySaver(0)}
		res, err := build(tc.d, saver, nil, nil).Invoke(ctx, "t", graph.Update[st]{})
		if err != nil || res.State.Count != n || res.Checkpoint == "" {
			t.Fatalf("durability %d: %+v, %v", tc.d, res, err)
		}
		snap, err := build(tc.d, saver, nil, nil).State(ctx, "t")
		if err != nil || snap.State.Count != n || len(snap.Next) != 0 || snap.Checkpoint.ID != res.Checkpoint {
			t.Fatalf("durability %d: head %+v, %v", tc.d, snap, err)
		}
		if saver.puts.Load() != tc.puts {
			t.Fatalf("durability %d: %d checkpoints written, want %d", tc.d, saver.puts.Load(), tc.puts)
		}
	}

	// Exit: a failing node writes the partial step (with the state after
	// the steps before it); Continue finishes.
	saver := &countingSaver{MemorySaver: graph.NewMemorySaver(0)}
	var fail atomic.Bool
	fail.Store(true)
	g := build(graph.DurabilityExit, saver, &fail, nil)
	if _, err := g.Invoke(ctx, "f", graph.Update[st]{}); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("failing run: %v", err)
	}
	if snap, err := g.State(ctx, "f"); err != nil || snap.State.Count != 3 || saver.puts.Load() != 1 {
		t.Fatalf("after the failure: %+v, %d puts, %v", snap.State, saver.puts.Load(), err)
	}
	if res, err := g.Continue(ctx, "f"); err != nil || res.State.Count != n {
		t.Fatalf("continue: %+v, %v", res.State, err)
	}

	// Exit: a run whose context ends still writes where it stopped.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g = build(graph.DurabilityExit, graph.NewMemorySaver(0), nil, cancel)
	if _, err := g.Invoke(cctx, "c", graph.Update[st]{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if snap, err := g.State(ctx, "c"); err != nil || snap.State.Count != 4 || len(snap.Next) != 1 {
		t.Fatalf("after cancel: %+v next %v, %v", snap.State, snap.Next, err)
	}
	if res, err := g.Continue(ctx, "c"); err != nil || res.State.Count != n {
		t.Fatalf("continue after cancel: %+v, %v", res.State, err)
	}
	if _, err := newBuilderCompile(graph.WithDurability(9)); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("bad durability: %v", err)
	}
}

func newBuilderCompile(opts ...graph.Option) (*graph.Graph[st], error) {
	b, f := newBuilder()
	b.AddNode("n", logNode(f, "n")).AddEdge(graph.START, "n")
	return b.Compile(opts...)
}

// TestTaskIDsUnique: task ids never repeat within a thread — without a
// checkpointer, with one, and under DurabilityExit, where checkpoints are
// held back — so a subgraph visited twice gets two child threads.
func TestTaskIDsUnique(t *testing.T) {
	cb, cf := newBuilder()
	cb.AddNode("inc", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(cf.total.Set(1)), nil
	})
	cb.AddEdge(graph.START, "inc")
	child := mustCompile(t, cb)
	for _, tc := range []struct {
		name string
		opts []graph.Option
	}{
		{"none", nil},
		{"sync", []graph.Option{graph.WithCheckpointer(graph.NewMemorySaver(0))}},
		{"exit", []graph.Option{graph.WithCheckpointer(graph.NewMemorySaver(0)), graph.WithDurability(graph.DurabilityExit)}},
	} {
		b, f := newBuilder()
		var mu sync.Mutex
		seen := map[string]int{}
		b.AddNode("loop", func(ctx context.Context, s st) (graph.Update[st], error) {
			info, _ := graph.Info(ctx)
			mu.Lock()
			seen[info.Task]++
			mu.Unlock()
			if s.Count >= 3 {
				return graph.Update[st]{}.Goto(graph.END), nil
			}
			return graph.Updates(f.count.Set(s.Count + 1)), nil
		})
		graph.AddSubgraph(b, "sub", child)
		b.AddEdge(graph.START, "loop").AddEdge("loop", "sub").AddEdge("sub", "loop")
		g := mustCompile(t, b, tc.opts...)
		thread := ""
		if tc.opts != nil {
			thread = "t"
		}
		res, err := g.Invoke(ctxT(t), thread, graph.Update[st]{})
		// Each run of the subgraph adds its total (the parent's + 1) to the
		// parent's through Sum: 0+1, 1+2, 3+4.
		if err != nil || res.State.Total != 7 {
			t.Fatalf("%s: %+v, %v; want total 7 (the subgraph ran three times, each on a fresh child thread)", tc.name, res.State, err)
		}
		if len(seen) != 4 {
			t.Fatalf("%s: task ids %v, want 4 distinct", tc.name, seen)
		}
	}
}
