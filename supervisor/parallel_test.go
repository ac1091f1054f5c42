package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

type parState struct {
	Text string `json:"text"`
	X    string `json:"x,omitempty"`
	Y    string `json:"y,omitempty"`
	Big  string `json:"big,omitempty"`
}

// parallel is an orchestration with two remote steps in one super-step (x
// on task-a, y on task-b) joined by a local step that, for text "big",
// writes more state than a NATS message holds.
func parallel(t testing.TB) supervisor.Definition {
	t.Helper()
	b := graph.New[parState]()
	x := graph.Plain(b, "x", func(s *parState) *string { return &s.X })
	y := graph.Plain(b, "y", func(s *parState) *string { return &s.Y })
	big := graph.Plain(b, "big", func(s *parState) *string { return &s.Big })
	remote := func(kind string, f *graph.Field[parState, string]) graph.NodeFunc[parState] {
		return func(ctx context.Context, s parState) (graph.Update[parState], error) {
			res, err := supervisor.Call(ctx, records.Ref{Kind: kind, ID: "p"}, "task", kinds.TaskInput{Text: s.Text})
			if err != nil {
				return graph.Update[parState]{}, err
			}
			var out kinds.TaskResult
			if err := res.Decode(&out); err != nil {
				return graph.Update[parState]{}, err
			}
			return graph.Updates(f.Set(out.Output)), nil
		}
	}
	b.AddNode("x", remote("task-a", x))
	b.AddNode("y", remote("task-b", y))
	b.AddNode("join", func(ctx context.Context, s parState) (graph.Update[parState], error) {
		if s.Text == "big" {
			return graph.Updates(big.Set(strings.Repeat("z", 2<<20))), nil
		}
		return graph.Update[parState]{}, nil
	})
	b.AddEdge(graph.START, "x").AddEdge(graph.START, "y").AddEdge("x", "join").AddEdge("y", "join").AddEdge("join", graph.END)
	def, err := supervisor.Define(supervisor.Spec[parState]{Name: "parallel", Graph: b,
		Workers: []records.Ref{{Kind: "task-a", ID: "p"}, {Kind: "task-b", ID: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestParallelTasks runs two remote steps at once: both tasks are out
// together, the first result is kept until the second arrives, then both
// nodes resume with their own answers.
func TestParallelTasks(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	workers := startWorkers(t, conn)
	startSupervisor(t, conn, parallel(t))
	c := newClient(t, conn)
	ctx := ctxT(t)

	id, err := c.Start(ctx, "parallel", parState{Text: "one two three"})
	if err != nil {
		t.Fatal(err)
	}
	o := waitStatus(t, c, id, supervisor.StatusCompleted)
	var s parState
	if err := json.Unmarshal(o.Results, &s); err != nil {
		t.Fatal(err)
	}
	if s.X != "ONE TWO THREE" || s.Y != "three two one" || o.Steps != 3 {
		t.Fatalf("results %+v after %d steps", s, o.Steps)
	}

	// With the workers stopped both tasks stay out: RUNNING, waiting for both.
	workers.Stop(t)
	id, err = c.Start(ctx, "parallel", parState{Text: "big"})
	if err != nil {
		t.Fatal(err)
	}
	o, err = c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != supervisor.StatusRunning || o.WaitingFor != "task-a/p,task-b/p" || len(o.Tasks) != 2 || o.Step != "x" {
		t.Fatalf("with both tasks out: %+v", o)
	}
	startWorkers(t, conn)
	o = waitStatus(t, c, id, supervisor.StatusFailed)
	if !strings.Contains(o.Error, supervisor.ErrTooLarge.Error()+": the orchestration record would be") || !strings.Contains(o.Error, "keep large data outside the state") {
		t.Fatalf("error %q", o.Error)
	}
}

// TestDefineErrors checks the definitions Define refuses.
func TestDefineErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec supervisor.Spec[parState]
	}{
		{"bad name", supervisor.Spec[parState]{Name: "a.b", Graph: graph.New[parState]()}},
		{"no graph", supervisor.Spec[parState]{Name: "x"}},
		{"graph that does not compile", supervisor.Spec[parState]{Name: "x", Graph: graph.New[parState]().AddEdge(graph.START, "nowhere")}},
		{"bad worker", supervisor.Spec[parState]{Name: "x", Graph: func() *graph.Builder[parState] {
			b := graph.New[parState]()
			b.AddNode("n", func(context.Context, parState) (graph.Update[parState], error) { return graph.Update[parState]{}, nil })
			return b.AddEdge(graph.START, "n")
		}(), Workers: []records.Ref{{Kind: "task-a"}}}},
	} {
		if _, err := supervisor.Define(tc.spec); !errors.Is(err, supervisor.ErrInvalid) {
			t.Errorf("%s: %v, want an ErrInvalid error", tc.name, err)
		}
	}
}
