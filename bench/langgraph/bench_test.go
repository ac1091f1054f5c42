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
	for _, d := range []struct {
		name string
		mode graph.Durability
	}{{"async", graph.DurabilityAsync}, {"exit", graph.DurabilityExit}} {
		b.Run("memory-saver-"+d.name, func(b *testing.B) {
			g, count := linear(b, graph.WithCheckpointer(graph.NewMemorySaver(0)), graph.WithDurability(d.mode))
			run(b, g, count, true, "")
		})
		b.Run("kv-"+d.name, func(b *testing.B) {
			srv := bustest.NewServer(b)
			conn := srv.Connect(b)
			s, err := kvsaver.New(context.Background(), conn, kvsaver.Config{})
			if err != nil {
				b.Fatal(err)
			}
			g, count := linear(b, graph.WithCheckpointer(s), graph.WithDurability(d.mode))
			run(b, g, count, true, "")
		})
	}
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

// BenchmarkSubgraph is one invocation of a parent graph whose only node is
// the 10-node counter graph as a subgraph (same state), per op; ns/step
// counts the child's 10 steps.
func BenchmarkSubgraph(b *testing.B) {
	for _, withSaver := range []bool{false, true} {
		name := "memory-none"
		if withSaver {
			name = "memory-saver"
		}
		b.Run(name, func(b *testing.B) {
			child, _ := linear(b)
			pb := graph.New[counter]()
			count := graph.FieldOf[int](pb, "count")
			graph.AddSubgraph(pb, "child", child)
			pb.AddEdge(graph.START, "child")
			var opts []graph.Option
			if withSaver {
				opts = append(opts, graph.WithCheckpointer(graph.NewMemorySaver(0)))
			}
			g, err := pb.Compile(opts...)
			if err != nil {
				b.Fatal(err)
			}
			run(b, g, count, withSaver, "")
		})
	}
}

// BenchmarkStream streams one invocation of the 10-node counter graph per
// op in modes values and updates, reading every event.
func BenchmarkStream(b *testing.B) {
	g, count := linear(b)
	ctx := context.Background()
	modes := graph.WithStreamModes(graph.StreamValues, graph.StreamUpdates)
	b.ReportAllocs()
	for b.Loop() {
		events := 0
		for _, err := range g.Stream(ctx, "", graph.Updates(count.Set(0)), modes) {
			if err != nil {
				b.Fatal(err)
			}
			events++
		}
		if events != 2*nodes+1 {
			b.Fatalf("%d events, want %d", events, 2*nodes+1)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/step")
}
