package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/task"
)

// scriptedAgent streams a chunk, then fails when the input is "fail" (as the
// writer kind does when its model is down: core/task emits task.error and
// the record is applied), and completes otherwise.
type scriptedAgent struct{}

type scriptedHandle string

func (h scriptedHandle) Session() string { return string(h) }
func (scriptedHandle) Cancel()           {}

func (scriptedAgent) Start(_ context.Context, input string, start task.Start, sinks task.Sinks) (task.Handle, error) {
	sinks.Text("a first chunk, ")
	if input == "fail" {
		sinks.Fail(core.Errorf(core.CodeProvider, "llm.stream", "the model at http://127.0.0.1:1 is down"))
	} else {
		sinks.Text("and the rest")
		sinks.Done()
	}
	return scriptedHandle(start.Session), nil
}

// TestSendWaitFailed: send --wait of a task whose run fails (the record is
// applied, the failure is a task.error output) exits with status 8 and
// prints the task's error, not "applied"; a task that completes, sent to
// the same effector after it, is applied (exit 0), not taken for the
// earlier failure; and a send JetStream takes for a duplicate of the failed
// record (the same id) says the same failure again.
func TestSendWaitFailed(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	actortest.StartNode(t, conn, actor.Options{Logger: slog.New(slog.DiscardHandler)}, task.Kind("writer", scriptedAgent{}))
	w := &world{url: srv.URL}
	w.ea(t, "", "create", "writer/w1").ok(t, "create")

	r := w.ea(t, "", "send", "writer/w1", `{"input":"fail"}`, "--type", "task", "--process", "s1", "--id", "t-1", "--wait")
	t.Logf("send --wait of a failing task: exit %d: %s", r.code, strings.TrimSpace(r.err))
	if r.code != exitFailed || r.out != "" {
		t.Fatalf("send --wait of a failing task: exit %d, stdout %q, stderr %q; want %d and nothing on stdout", r.code, r.out, r.err, exitFailed)
	}
	for _, want := range []string{"t-1", "failed", "task.error", "(code provider)", "the model at http://127.0.0.1:1 is down", "ea tail outbox writer/w1"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr %q does not say %q", r.err, want)
		}
	}

	r = w.ea(t, "", "send", "writer/w1", `{"input":"a haiku"}`, "--type", "task", "--process", "s2", "--wait").ok(t, "send --wait of a task that completes")
	if !strings.Contains(r.out, "applied") || !strings.Contains(r.out, `"completed":1`) || !strings.Contains(r.out, `"failed":1`) {
		t.Errorf("send --wait of a task that completes printed %q", r.out)
	}

	// The same id again: JetStream keeps the first record, whose outputs
	// were stored before this send.
	r = w.ea(t, "", "send", "writer/w1", `{"input":"fail"}`, "--type", "task", "--process", "s1", "--id", "t-1", "--wait")
	if r.code != exitFailed || !strings.Contains(r.err, "is down") {
		t.Errorf("send --wait of a duplicate of a failed task: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

// TestOrchStartWaitFailed: orch start --wait of an orchestration that ends
// FAILED prints its status and exits with status 8, its error on stderr.
func TestOrchStartWaitFailed(t *testing.T) {
	w := startWorld(t)
	// Task A fails on every attempt, then task B, which does A's work on
	// the alternative path, fails too: the demo fails.
	r := w.ea(t, "", "orch", "start", "demo", `{"text":"doomed","fail_a":4,"fail_b":2}`, "--wait")
	t.Logf("orch start --wait of a failing orchestration: exit %d: %s", r.code, strings.TrimSpace(r.err))
	if r.code != exitFailed {
		t.Fatalf("orch start --wait of a failing orchestration: exit %d, stdout %q, stderr %q; want %d", r.code, r.out, r.err, exitFailed)
	}
	if !strings.Contains(r.out, "FAILED") {
		t.Errorf("stdout %q does not show the status FAILED", r.out)
	}
	for _, want := range []string{"FAILED", "ea orch status "} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr %q does not say %q", r.err, want)
		}
	}
}
