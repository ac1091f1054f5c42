package langgraph_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/kvsaver"
)

type counter struct {
	Count int `json:"count"`
}

const nodes = 10

func linear(b *testing.B, opts ...graph.Option) (*graph.Graph[counter], *graph.Field[counter, int]) {
	gb := graph.New[counter]()
	count := graph.Plain(gb, "count", func(s *counter) *int { return &s.Count })
	prev := graph.START
	for i := range nodes {
		name := "n" + strconv.Itoa(i)
		gb.AddNode(name, func(ctx context.Context, s counter) (graph.Update[counter], error) {
			return graph.Updates(count.Set(s.Count + 1)), nil
		})
		gb.AddEdge(prev, name)
		prev = name
	}
	gb.AddEdge(prev, graph.END)
	g, err := gb.Compile(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return g, count
}

// run invokes g b.N times, each on a thread of its own (or all on one), and
// reports the time per super-step.
func run(b *testing.B, g *graph.Graph[counter], count *graph.Field[counter, int], threads bool, oneThread string) {
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		thread := oneThread
		if threads && thread == "" {
			thread = "t" + strconv.Itoa(i)
		}
		i++
		res, err := g.Invoke(ctx, thread, graph.Updates(count.Set(0)))
		if err != nil {
			b.Fatal(err)
		}
		if res.State.Count != nodes {
			b.Fatalf("count %d, want %d", res.State.Count, nodes)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/step")
}

// BenchmarkLinear10 is one invocation of the 10-node counter graph per op.
func BenchmarkLinear10(b *testing.B) {
	b.Run("memory-none", func(b *testing.B) {
		g, count := linear(b)
		run(b, g, count, false, "")
	})
	b.Run("memory-saver", func(b *testing.B) {
		g, count := linear(b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
		run(b, g, count, true, "")
	})
	b.Run("kv", func(b *testing.B) {
		srv := bustest.NewServer(b)
		conn := srv.Connect(b)
		s, err := kvsaver.New(context.Background(), conn, kvsaver.Config{})
		if err != nil {
			b.Fatal(err)
		}
		g, count := linear(b, graph.WithCheckpointer(s))
		run(b, g, count, true, "")
	})
	b.Run("kv-one-thread", func(b *testing.B) {
		// Every invocation continues one thread: retention pruning included.
		srv := bustest.NewServer(b)
		conn := srv.Connect(b)
		s, err := kvsaver.New(context.Background(), conn, kvsaver.Config{})
		if err != nil {
			b.Fatal(err)
		}
		g, count := linear(b, graph.WithCheckpointer(s))
		run(b, g, count, true, fmt.Sprint("one"))
	})
}
