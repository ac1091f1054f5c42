package kvsaver_test

import (
	"context"
	"fmt"
	"os"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/kvsaver"
)

type job struct {
	Done []string `json:"done"`
}

// A graph checkpointing to JetStream KV; a second compiled graph (as another
// process would) reads the thread's history.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kvsaver-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	if err := conn.Provision(ctx); err != nil {
		fmt.Println(err)
		return
	}
	saver, err := kvsaver.New(ctx, conn, kvsaver.Config{Retention: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	build := func() (*graph.Graph[job], error) {
		b := graph.New[job]()
		done := graph.Reduced(b, "done", func(s *job) *[]string { return &s.Done }, graph.Append[string])
		for _, n := range []string{"fetch", "parse", "store"} {
			b.AddNode(n, func(ctx context.Context, s job) (graph.Update[job], error) {
				return graph.Updates(done.Set([]string{n})), nil
			})
		}
		b.AddEdge(graph.START, "fetch").AddEdge("fetch", "parse").AddEdge("parse", "store").AddEdge("store", graph.END)
		return b.Compile(graph.WithCheckpointer(saver))
	}
	g1, err := build()
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := g1.Invoke(ctx, "job-7", graph.Update[job]{}); err != nil {
		fmt.Println(err)
		return
	}
	g2, err := build()
	if err != nil {
		fmt.Println(err)
		return
	}
	hist, err := g2.History(ctx, "job-7", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range hist {
		fmt.Println(h.Checkpoint.ID, h.Checkpoint.Source, h.State.Done, h.Next)
	}
	// Output:
	// 000000000004 loop [fetch parse store] []
	// 000000000003 loop [fetch parse] [store]
	// 000000000002 loop [fetch] [parse]
	// 000000000001 input [] [fetch]
}
