package supervisor_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// TestDemo runs the demo orchestration end to end: task A on a worker
// effector, WAITING for input, task B, COMPLETED with both results; the task
// records went to the workers' mailboxes with the orchestration as process
// and the supervisor's mailbox as reply.
func TestDemo(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	s := startSupervisor(t, conn)
	c := newClient(t, conn)
	ctx := ctxT(t)

	id, err := c.Start(ctx, "demo", map[string]any{"text": "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	o := waitStatus(t, c, id, supervisor.StatusWaiting)
	if o.Step != "ask" || o.WaitingFor != "input" || o.Name != "demo" || o.ID != id || len(o.Tasks) != 0 ||
		string(o.Input) != `{"text":"hello world"}` ||
		string(o.Prompt) != `{"question":"a note to add to HELLO WORLD","want":"{\"note\": \"...\"}"}` {
		t.Fatalf("waiting: %+v", o)
	}
	if r := demoResults(t, o); r.A != "HELLO WORLD" || r.AVia != "task-a/demo" || r.B != "" {
		t.Fatalf("results while waiting: %+v", r)
	}
	// The bucket's record, decoded, is what status answers.
	bucket, err := conn.JetStream().KeyValue(ctx, conn.Names().OrchBucket())
	if err != nil {
		t.Fatal(err)
	}
	entry, err := bucket.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := supervisor.DecodeOrchestration(entry.Value())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, decoded), mustJSON(t, o); got != want {
		t.Fatalf("DecodeOrchestration of the bucket's record:\n got %s\nwant %s (status)", got, want)
	}
	st, err := c.Input(ctx, id, map[string]string{"note": "from me"})
	if err != nil {
		t.Fatal(err)
	}
	if st != supervisor.StatusRunning && st != supervisor.StatusCompleted {
		t.Fatalf("status after input %s", st)
	}
	o = waitStatus(t, c, id, supervisor.StatusCompleted)
	r := demoResults(t, o)
	if r.A != "HELLO WORLD" || r.Note != "from me" || r.B != "me from WORLD HELLO" || r.Attempts != 1 {
		t.Fatalf("results %+v", r)
	}
	if o.Step != "__end__" || o.WaitingFor != "" || o.Error != "" || o.Steps != 4 {
		t.Fatalf("completed: %+v", o)
	}

	for _, w := range []string{"task-a", "task-b"} {
		recs := mailboxRecords(t, conn, "ea.mbox."+w+".demo")
		if len(recs) != 1 {
			t.Fatalf("%d records in %s's mailbox, want 1", len(recs), w)
		}
		if rec := recs[0]; rec.Type != "task" || rec.Process != id || rec.Reply != "ea.mbox.supervisor."+id || rec.From.String() != "supervisor/"+id {
			t.Fatalf("task record %+v", rec)
		}
	}
	results := mailboxRecords(t, conn, "ea.mbox.supervisor."+id)
	if len(results) != 2 || results[0].Type != "result" || results[1].Type != "result" {
		t.Fatalf("supervisor mailbox: %+v", results)
	}
	if got := s.counter(t, "ea_orchestrations_finished_total", "name", "demo", "status", "COMPLETED"); got != 1 {
		t.Errorf("finished COMPLETED = %v, want 1", got)
	}
	if got := s.counter(t, "ea_orchestration_steps_total", "name", "demo"); got != 4 {
		t.Errorf("steps = %v, want 4", got)
	}
	if got := s.counter(t, "ea_orchestrations_started_total", "name", "demo"); got != 1 {
		t.Errorf("started = %v, want 1", got)
	}
}

// TestWorkerErrors shows the three ways a worker's error record feeds the
// orchestration's decision: a retry, an alternative path, a failure.
func TestWorkerErrors(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	startSupervisor(t, conn)
	c := newClient(t, conn)
	ctx := ctxT(t)

	for _, tc := range []struct {
		name     string
		input    demo.Input
		attempts int
		via      string
		a, b     string
		status   supervisor.Status
		err      string // the error of a FAILED orchestration contains it
	}{
		{name: "retry", input: demo.Input{Text: "one two", FailA: 2}, attempts: 2, via: "task-a/demo",
			a: "ONE TWO", b: "ok TWO ONE", status: supervisor.StatusCompleted},
		{name: "alternative path", input: demo.Input{Text: "one two", FailA: 99}, attempts: 3, via: "task-b/demo",
			a: "two one", b: "ok one two", status: supervisor.StatusCompleted},
		{name: "fail after the alternative", input: demo.Input{Text: "one two", FailA: 99, FailB: 2}, attempts: 3,
			status: supervisor.StatusFailed, err: "step a_alt: task A failed 3 times and the alternative failed too: task-b/demo failed attempt 1 on purpose (fail_until 2)"},
		{name: "fail in b", input: demo.Input{Text: "one two", FailB: 2}, attempts: 1, via: "task-a/demo", a: "ONE TWO",
			status: supervisor.StatusFailed, err: "step b: task B failed: task-b/demo failed attempt 1 on purpose (fail_until 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := c.Start(ctx, "demo", tc.input)
			if err != nil {
				t.Fatal(err)
			}
			var o supervisor.Orchestration
			if tc.err != "" && tc.a == "" {
				o = waitStatus(t, c, id, supervisor.StatusFailed)
			} else {
				waitStatus(t, c, id, supervisor.StatusWaiting)
				if _, err := c.Input(ctx, id, demo.Note{Note: "ok"}); err != nil {
					t.Fatal(err)
				}
				o = waitStatus(t, c, id, tc.status)
			}
			r := demoResults(t, o)
			if r.Attempts != tc.attempts || r.AVia != tc.via || r.A != tc.a || r.B != tc.b {
				t.Fatalf("results %+v, want attempts %d via %q a %q b %q", r, tc.attempts, tc.via, tc.a, tc.b)
			}
			if o.Error != tc.err {
				t.Fatalf("error %q, want %q", o.Error, tc.err)
			}
			if tc.attempts > 1 && !strings.Contains(strings.Join(r.Log, "\n"), "a: attempt 1 failed: task-a/demo failed attempt 1 on purpose") {
				t.Fatalf("log %q lacks the failed attempt", r.Log)
			}
		})
	}
}

// TestAPIErrors checks the typed errors of the API: unknown ids and names,
// bad requests, double input, input and cancel after the end.
func TestAPIErrors(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	c := newClient(t, conn)
	ctx := ctxT(t)

	if _, err := c.Start(ctx, "demo", map[string]string{"text": "x"}); !errors.Is(err, supervisor.ErrUnavailable) {
		t.Fatalf("start with no supervisor: %v, want ErrUnavailable", err)
	}
	workers := startWorkers(t, conn)
	s := startSupervisor(t, conn)

	for _, tc := range []struct {
		name string
		call func() error
		want error
		code int
	}{
		{"status of unknown id", func() error { _, err := c.Status(ctx, "nope"); return err }, supervisor.ErrUnknownOrchestration, 404},
		{"input to unknown id", func() error { _, err := c.Input(ctx, "nope", 1); return err }, supervisor.ErrUnknownOrchestration, 404},
		{"cancel unknown id", func() error { return c.Cancel(ctx, "nope") }, supervisor.ErrUnknownOrchestration, 404},
		{"bad id", func() error { _, err := c.Status(ctx, "a.b"); return err }, supervisor.ErrInvalid, 400},
		{"empty id", func() error { _, err := c.Status(ctx, ""); return err }, supervisor.ErrInvalid, 400},
		{"unknown name", func() error { _, err := c.Start(ctx, "nope", nil); return err }, supervisor.ErrUnknownName, 404},
		{"bad input", func() error { _, err := c.Start(ctx, "demo", map[string]int{"text": 1}); return err }, supervisor.ErrInvalid, 400},
		{"missing input", func() error { _, err := c.Start(ctx, "demo", nil); return err }, supervisor.ErrInvalid, 400},
	} {
		err := tc.call()
		var ae *supervisor.APIError
		if !errors.Is(err, tc.want) || !errors.As(err, &ae) || ae.Code != tc.code {
			t.Errorf("%s: %v, want %v (%d)", tc.name, err, tc.want, tc.code)
		}
	}
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	raw, err := conn.NATS().Request("ea.orch.status", []byte(`{"id": 5}`), 5e9)
	if err != nil || raw.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Fatalf("malformed body: %v %v", raw, err)
	}

	id, err := c.Start(ctx, "demo", demo.Input{Text: "a b"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, supervisor.StatusWaiting)
	// Input that does not fit is refused; the orchestration keeps waiting.
	if _, err := c.Input(ctx, id, map[string]int{"note": 5}); !errors.Is(err, supervisor.ErrInvalid) {
		t.Fatalf("input that does not fit: %v, want ErrInvalid", err)
	}
	if o := waitStatus(t, c, id, supervisor.StatusWaiting); o.Steps != 2 {
		t.Fatalf("steps %d after a refused input, want 2", o.Steps)
	}
	// With the workers stopped, task B stays out: the orchestration is
	// RUNNING after the input, and a second input is refused.
	workers.Stop(t)
	st, err := c.Input(ctx, id, demo.Note{Note: "first"})
	if err != nil || st != supervisor.StatusRunning {
		t.Fatalf("first input: %s %v", st, err)
	}
	if _, err := c.Input(ctx, id, demo.Note{Note: "second"}); !errors.Is(err, supervisor.ErrNotWaiting) {
		t.Fatalf("second input: %v, want ErrNotWaiting", err)
	}
	o, err := c.Status(ctx, id)
	if err != nil || o.Status != supervisor.StatusRunning || o.WaitingFor != "task-b/demo" || len(o.Tasks) != 1 || o.Tasks[0].Worker != "task-b/demo" {
		t.Fatalf("status after input: %+v %v", o, err)
	}
	if err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if o, err = c.Status(ctx, id); err != nil || o.Status != supervisor.StatusCancelled || len(o.Tasks) != 0 {
		t.Fatalf("after cancel: %+v %v", o, err)
	}
	if err := c.Cancel(ctx, id); !errors.Is(err, supervisor.ErrFinished) {
		t.Fatalf("cancel twice: %v, want ErrFinished", err)
	}
	if _, err := c.Input(ctx, id, demo.Note{Note: "late"}); !errors.Is(err, supervisor.ErrFinished) {
		t.Fatalf("input after cancel: %v, want ErrFinished", err)
	}
	// The worker got a cancel record with the orchestration as process.
	recs := mailboxRecords(t, conn, "ea.mbox.task-b.demo")
	if len(recs) != 2 || recs[0].Type != "task" || recs[1].Type != "cancel" || recs[1].Process != id || recs[1].Priority != "high" {
		t.Fatalf("task-b/demo mailbox: %+v", recs)
	}
	// Back up, the worker takes the cancel (high priority) and skips the
	// task, or, if it took the task first, answers it and the supervisor
	// drops the answer: either way the orchestration stays CANCELLED.
	startWorkers(t, conn)
	ac, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var ws kinds.TaskState
	actortest.Eventually(t, 30*time.Second, "the worker to take the cancel and the task", func() bool {
		doc, err := ac.State(ctx, records.Ref{Kind: "task-b", ID: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		if err := doc.Decode(&ws); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ws.Cancelled, id) && ws.Skipped+ws.Done == 1
	})
	if ws.Done == 1 {
		actortest.Eventually(t, 30*time.Second, "the late answer dropped", func() bool {
			return s.counter(t, "ea_orchestration_records_dropped_total", "reason", "stale") == 1
		})
	}
	t.Logf("worker after the cancel: %+v", ws)
	if o, err = c.Status(ctx, id); err != nil || o.Status != supervisor.StatusCancelled || o.Steps != 4 {
		t.Fatalf("after the worker: %+v %v", o, err)
	}
}

func TestDecodeOrchestrationInvalid(t *testing.T) {
	t.Parallel()
	for _, value := range [][]byte{nil, []byte("not msgpack"), {0x80} /* an empty map */} {
		if _, err := supervisor.DecodeOrchestration(value); !errors.Is(err, supervisor.ErrInvalid) {
			t.Errorf("DecodeOrchestration(%q) = %v, want ErrInvalid", value, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
