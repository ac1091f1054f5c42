package supervisor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

type chainState struct {
	N int `json:"n"`
}

// chain is an orchestration of steps remote steps in a row on task-a/bench.
func chain(b testing.TB, steps int) supervisor.Definition {
	b.Helper()
	g := graph.New[chainState]()
	n := graph.Plain(g, "n", func(s *chainState) *int { return &s.N })
	prev := graph.START
	for i := range steps {
		name := fmt.Sprint("s", i)
		g.AddNode(name, func(ctx context.Context, s chainState) (graph.Update[chainState], error) {
			res, err := supervisor.Call(ctx, records.Ref{Kind: "task-a", ID: "bench"}, "task", kinds.TaskInput{Text: "x"})
			if err != nil {
				return graph.Update[chainState]{}, err
			}
			if res.Err != nil {
				return graph.Update[chainState]{}, res.Err
			}
			return graph.Updates(n.Set(s.N + 1)), nil
		})
		g.AddEdge(prev, name)
		prev = name
	}
	g.AddEdge(prev, graph.END)
	def, err := supervisor.Define(supervisor.Spec[chainState]{Name: "chain", Graph: g, Workers: []records.Ref{{Kind: "task-a", ID: "bench"}}})
	if err != nil {
		b.Fatal(err)
	}
	return def
}

// BenchmarkRemoteStep measures one remote step end to end: the supervisor
// resumes the graph, publishes the task, writes the orchestration record
// (compare-and-set), the worker effector runs and answers, the supervisor
// takes the result. Orchestrations of 10 steps run one at a time.
func BenchmarkRemoteStep(b *testing.B) {
	const steps = 10
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	startWorkers(b, conn)
	startSupervisor(b, conn, chain(b, steps))
	c := newClient(b, conn)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		id, err := c.Start(ctx, "chain", nil)
		if err != nil {
			b.Fatal(err)
		}
		for {
			o, err := c.Status(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if o.Status == supervisor.StatusCompleted {
				break
			}
			if o.Status.Final() {
				b.Fatalf("%s: %s", o.Status, o.Error)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*steps), "µs/step")
}
