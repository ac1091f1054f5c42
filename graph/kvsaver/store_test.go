package kvsaver_test

import (
	"context"
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/graphtest"
	"github.com/effectors/effectors/graph/kvsaver"
)

func TestStoreConformance(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	n := 0
	graphtest.RunStore(t, func(t *testing.T, embed graph.Embedder) graph.Store {
		n++
		s, err := kvsaver.NewStore(context.Background(), conn, kvsaver.StoreConfig{Prefix: "st" + string(rune('a'+n)), Embed: embed})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestStoreAcrossThreads: a node remembers in one thread what another
// thread's node stored, through the KV store (StoreOf).
func TestStoreAcrossThreads(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := ctxT(t)
	st, err := kvsaver.NewStore(ctx, conn, kvsaver.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b := graph.New[state]()
	blob := graph.FieldOf[string](b, "blob")
	b.AddNode("remember", func(ctx context.Context, s state) (graph.Update[state], error) {
		store, ok := graph.StoreOf(ctx)
		if !ok {
			return graph.Update[state]{}, graph.ErrNotSupported
		}
		ns := []string{"users", "ada"}
		if len(s.Log) > 0 {
			return graph.Update[state]{}, store.Put(ctx, ns, "food", s.Log[0])
		}
		it, err := store.Get(ctx, ns, "food")
		if err != nil {
			return graph.Update[state]{}, err
		}
		var food string
		if err := it.Decode(&food); err != nil {
			return graph.Update[state]{}, err
		}
		return graph.Updates(blob.Set("remembered " + food)), nil
	})
	b.AddEdge(graph.START, "remember")
	g, err := b.Compile(graph.WithStore(st), graph.WithCheckpointer(newSaver(t, conn)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(ctx, "thread-1", graph.Replace(state{Log: []string{"figs"}})); err != nil {
		t.Fatal(err)
	}
	res, err := g.Invoke(ctx, "thread-2", graph.Update[state]{})
	if err != nil || res.State.Blob != "remembered figs" {
		t.Fatalf("thread-2: %+v, %v", res.State, err)
	}
}
