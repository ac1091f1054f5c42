package kvsaver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/kvsaver"
)

// TestCache: a node's cached update is kept in KV: a graph on another
// connection (another process) hits it, after a restart of the server too.
func TestCache(t *testing.T) {
	srv := bustest.NewServer(t)
	ctx := ctxT(t)
	var runs atomic.Int32
	build := func(c graph.Cache) *graph.Graph[state] {
		b := graph.New[state]()
		blob := graph.FieldOf[string](b, "blob")
		b.AddNode("summarize", func(ctx context.Context, s state) (graph.Update[state], error) {
			runs.Add(1)
			return graph.Updates(blob.Set("summary of " + s.Log[0])), nil
		}, graph.WithCachePolicy(graph.CachePolicy{TTL: time.Hour}))
		b.AddEdge(graph.START, "summarize")
		g, err := b.Compile(graph.WithCache(c))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	c1, err := kvsaver.NewCache(ctx, srv.Connect(t), kvsaver.CacheConfig{})
	if err != nil {
		t.Fatal(err)
	}
	in := graph.Replace(state{Log: []string{"otters"}})
	if res, err := build(c1).Invoke(ctx, "", in); err != nil || res.State.Blob != "summary of otters" {
		t.Fatalf("first: %+v, %v", res.State, err)
	}
	srv.Restart(t)
	c2, err := kvsaver.NewCache(ctx, srv.Connect(t), kvsaver.CacheConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := build(c2).Invoke(ctx, "", in); err != nil || res.State.Blob != "summary of otters" || runs.Load() != 1 {
		t.Fatalf("second: %+v, %v, runs %d; want a cache hit", res.State, err, runs.Load())
	}
	if _, err := kvsaver.NewCache(ctx, srv.Connect(t), kvsaver.CacheConfig{Prefix: "a.b"}); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("bad prefix: %v", err)
	}
}
