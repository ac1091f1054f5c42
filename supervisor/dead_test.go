package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

type rejectState struct {
	Err    string `json:"err"`
	Worker string `json:"worker"`
}

// TestDeadLetteredTask sends a task its worker cannot process (its logic
// fails permanently, so the record goes to dead letters without an answer):
// the supervisor learns of it from the dead letter and the step gets an
// error answer to decide on, instead of waiting forever.
func TestDeadLetteredTask(t *testing.T) {
	t.Parallel()
	b := graph.New[rejectState]()
	errF := graph.Plain(b, "err", func(s *rejectState) *string { return &s.Err })
	wF := graph.Plain(b, "worker", func(s *rejectState) *string { return &s.Worker })
	b.AddNode("call", func(ctx context.Context, s rejectState) (graph.Update[rejectState], error) {
		res, err := supervisor.Call(ctx, records.Ref{Kind: "task-a", ID: "r"}, "task", kinds.TaskInput{Text: "x", Reject: true})
		if err != nil {
			return graph.Update[rejectState]{}, err
		}
		if res.Err == nil {
			return graph.Update[rejectState]{}, graph.Permanent(errNoError)
		}
		return graph.Updates(errF.Set(res.Err.Message), wF.Set(res.Err.Worker)), nil
	})
	b.AddEdge(graph.START, "call").AddEdge("call", graph.END)
	def, err := supervisor.Define(supervisor.Spec[rejectState]{Name: "reject", Graph: b, Workers: []records.Ref{{Kind: "task-a", ID: "r"}}})
	if err != nil {
		t.Fatal(err)
	}

	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	s := startSupervisor(t, conn, def)
	c := newClient(t, conn)
	id, err := c.Start(ctxT(t), "reject", nil)
	if err != nil {
		t.Fatal(err)
	}
	o := waitStatus(t, c, id, supervisor.StatusCompleted)
	var st rejectState
	if err := json.Unmarshal(o.Results, &st); err != nil {
		t.Fatal(err)
	}
	want := "the worker could not process the task (dead letter, reason rejected): task rejected on purpose (reject: true)"
	if st.Err != want || st.Worker != "task-a/r" || o.Steps != 2 {
		t.Fatalf("results %+v after %d steps, want error %q from task-a/r", st, o.Steps, want)
	}
	if got := s.counter(t, "ea_orchestration_steps_total", "event", "error"); got != 1 {
		t.Fatalf("error steps %v, want 1", got)
	}
}

var errNoError = errors.New("the rejected task got a result")
