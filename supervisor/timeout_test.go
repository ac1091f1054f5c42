package supervisor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go/jetstream"
)

type slowState struct {
	DelayMS int    `json:"delay_ms"`
	Worker  string `json:"worker"`
	Out     string `json:"out"`
	Err     string `json:"err"`
}

// TestTaskTimeout gives a slow worker 300ms: the step gets "no answer
// within 300ms" and the orchestration completes without waiting for the
// worker; the late answer is dropped. A fast worker's answer wins over its
// timer, which then has no effect.
func TestTaskTimeout(t *testing.T) {
	b := graph.New[slowState]()
	outF := graph.Plain(b, "out", func(s *slowState) *string { return &s.Out })
	errF := graph.Plain(b, "err", func(s *slowState) *string { return &s.Err })
	b.AddNode("call", func(ctx context.Context, s slowState) (graph.Update[slowState], error) {
		res, err := supervisor.Call(ctx, records.Ref{Kind: "task-a", ID: s.Worker}, "task",
			kinds.TaskInput{Text: "x", DelayMS: s.DelayMS}, supervisor.Timeout(300*time.Millisecond))
		if err != nil {
			return graph.Update[slowState]{}, err
		}
		if res.Err != nil {
			return graph.Updates(errF.Set(res.Err.Message)), nil
		}
		var out kinds.TaskResult
		if err := res.Decode(&out); err != nil {
			return graph.Update[slowState]{}, err
		}
		return graph.Updates(outF.Set(out.Output)), nil
	})
	b.AddEdge(graph.START, "call").AddEdge("call", graph.END)
	def, err := supervisor.Define(supervisor.Spec[slowState]{Name: "slow", Graph: b})
	if err != nil {
		t.Fatal(err)
	}

	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	s := startSupervisor(t, conn, def)
	c := newClient(t, conn)
	ctx := ctxT(t)

	for _, tc := range []struct {
		delayMS  int
		worker   string // one each: a worker takes one task at a time
		out, err string
	}{
		{delayMS: 1500, worker: "slow", err: "no answer within 300ms"},
		{delayMS: 0, worker: "fast", out: "X"},
	} {
		started := time.Now()
		id, err := c.Start(ctx, "slow", slowState{DelayMS: tc.delayMS, Worker: tc.worker})
		if err != nil {
			t.Fatal(err)
		}
		o := waitStatus(t, c, id, supervisor.StatusCompleted)
		took := time.Since(started)
		var st slowState
		if err := json.Unmarshal(o.Results, &st); err != nil {
			t.Fatal(err)
		}
		if st.Out != tc.out || st.Err != tc.err || o.Steps != 2 {
			t.Fatalf("delay %dms: results %+v after %d steps, want out %q err %q", tc.delayMS, st, o.Steps, tc.out, tc.err)
		}
		if tc.err != "" && took >= 1500*time.Millisecond {
			t.Fatalf("the timeout took %s: it waited for the worker", took)
		}
		t.Logf("delay %dms: completed after %s", tc.delayMS, took.Round(time.Millisecond))
	}
	// The slow worker's late answer is dropped; the fast one's timer fires
	// 300ms after its task and changes nothing.
	actortest.Eventually(t, 30*time.Second, "the late answer dropped", func() bool {
		return s.counter(t, "ea_orchestration_records_dropped_total", "reason", "stale") == 1
	})
	if got := s.counter(t, "ea_orchestration_steps_total"); got != 4 {
		t.Fatalf("%v steps applied, want 4 (start and one answer each)", got)
	}
	// Both timeouts went through the timer stream: set as schedules, fired
	// by the server, and no schedule is left.
	ts, err := conn.TimerStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ts.Info(ctx, jetstream.WithSubjectFilter("ea.timer.*."+supervisor.TimerKind+".>"))
	if err != nil {
		t.Fatal(err)
	}
	fired, set := 0, 0
	for subject, n := range info.State.Subjects {
		switch {
		case strings.HasPrefix(subject, "ea.timer.fire."):
			fired += int(n)
		case strings.HasPrefix(subject, "ea.timer.set."):
			set += int(n)
		}
	}
	if fired != 2 || set != 0 {
		t.Fatalf("timer stream holds %d fired timeouts and %d schedules, want 2 and 0", fired, set)
	}
}
