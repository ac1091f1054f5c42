package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/effectors/effectors/examples/demo"
	"sync"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// TestRedeliveredResult publishes a worker's result again (as a redelivery
// after a crash would deliver it), a result nobody awaits, a record for an
// unknown orchestration and one of a wrong type: none changes anything.
func TestRedeliveredResult(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	s := startSupervisor(t, conn)
	c := newClient(t, conn)
	ctx := ctxT(t)

	id, err := c.Start(ctx, "demo", demo.Input{Text: "x y"})
	if err != nil {
		t.Fatal(err)
	}
	before := waitStatus(t, c, id, supervisor.StatusWaiting)
	if before.Steps != 2 {
		t.Fatalf("steps %d, want 2 (start, result of a)", before.Steps)
	}
	got := mailboxRecords(t, conn, s.Mailbox(id))
	if len(got) != 1 || got[0].Type != "result" {
		t.Fatalf("supervisor mailbox %+v", got)
	}
	again := got[0]
	again.ID = again.ID + "-again" // a new id, so the stream keeps it
	orphan := got[0]
	orphan.ID, orphan.Cause = records.NewID(), "no-such-task"
	unknown := got[0]
	unknown.ID = records.NewID()
	wrongType := got[0]
	wrongType.ID, wrongType.Type = records.NewID(), "inc"
	for _, p := range []struct {
		rec     records.Record
		subject string
	}{{again, s.Mailbox(id)}, {orphan, s.Mailbox(id)}, {unknown, s.Mailbox("unknown-orch")}, {wrongType, s.Mailbox(id)}} {
		if _, err := conn.JetStream().PublishMsg(ctx, p.rec.Msg(p.subject)); err != nil {
			t.Fatal(err)
		}
	}
	actortest.Eventually(t, 30e9, "4 records dropped", func() bool {
		return s.counter(t, "ea_orchestration_records_dropped_total") == 4
	})
	for reason, want := range map[string]float64{"stale": 2, "unknown": 1, "type": 1} {
		if got := s.counter(t, "ea_orchestration_records_dropped_total", "reason", reason); got != want {
			t.Errorf("dropped %s = %v, want %v", reason, got, want)
		}
	}
	after, err := c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != supervisor.StatusWaiting || after.Steps != before.Steps || string(after.Results) != string(before.Results) {
		t.Fatalf("orchestration changed by a redelivered result:\nbefore %+v\nafter  %+v", before, after)
	}
	if _, err := c.Input(ctx, id, demo.Note{Note: "n"}); err != nil {
		t.Fatal(err)
	}
	if o := waitStatus(t, c, id, supervisor.StatusCompleted); o.Steps != 4 {
		t.Fatalf("steps %d, want 4", o.Steps)
	}
}

// TestTwoSupervisors runs two supervisors on one NATS: requests and results
// are shared between them, concurrent inputs and cancels of one
// orchestration through both are applied exactly once (compare-and-set; the
// loser re-reads and gets a typed error), and every orchestration completes
// with exact results.
func TestTwoSupervisors(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn1, conn2 := srv.Connect(t), srv.Connect(t)
	startWorkers(t, conn1)
	s1, s2 := startSupervisor(t, conn1), startSupervisor(t, conn2)
	c := newClient(t, conn1)
	ctx := ctxT(t)

	const n = 8
	ids := make([]string, n)
	for i := range ids {
		id, err := c.Start(ctx, "demo", demo.Input{Text: fmt.Sprintf("w%d x", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	for _, id := range ids {
		waitStatus(t, c, id, supervisor.StatusWaiting)
	}
	// Half get two inputs at once, one through each supervisor; the other
	// half an input and a cancel at once.
	for i, id := range ids {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, s := range []*sup{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 || j == 0 {
					_, errs[j] = s.Input(ctx, id, []byte(fmt.Sprintf(`{"note":"n%d"}`, j)))
				} else {
					errs[j] = s.Cancel(ctx, id)
				}
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, supervisor.ErrNotWaiting), errors.Is(err, supervisor.ErrFinished):
			default:
				t.Fatalf("orchestration %d: unexpected error %v", i, err)
			}
		}
		if i%2 == 0 && ok != 1 {
			t.Fatalf("orchestration %d: %d of 2 concurrent inputs accepted (%v), want exactly 1", i, ok, errs)
		}
		if i%2 == 1 && ok == 0 {
			t.Fatalf("orchestration %d: neither input nor cancel accepted: %v", i, errs)
		}
	}
	var completed, cancelled int
	for i, id := range ids {
		var o supervisor.Orchestration
		actortest.Eventually(t, 30e9, "orchestration final", func() bool {
			var err error
			o, err = c.Status(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return o.Status.Final()
		})
		switch o.Status {
		case supervisor.StatusCompleted:
			completed++
			r := demoResults(t, o)
			if r.A != fmt.Sprintf("W%d X", i) || (r.Note != "n0" && r.Note != "n1") || r.B != fmt.Sprintf("%s X W%d", r.Note, i) {
				t.Fatalf("orchestration %d results %+v", i, r)
			}
			if o.Steps != 4 {
				t.Fatalf("orchestration %d: %d steps, want 4", i, o.Steps)
			}
		case supervisor.StatusCancelled:
			cancelled++
		default:
			t.Fatalf("orchestration %d: %s %s", i, o.Status, o.Error)
		}
	}
	if completed < n/2 {
		t.Fatalf("%d completed, want at least %d", completed, n/2)
	}
	// One task A per orchestration. Task B: one per orchestration whose
	// input was accepted, plus the tasks of supervisors that lost a race
	// (computed the same step from another input, published, then lost the
	// compare-and-set): their results answer no active task and are dropped.
	if got := len(mailboxRecords(t, conn1, "ea.mbox.task-a.demo")); got != n {
		t.Fatalf("%d task records for task A, want %d", got, n)
	}
	taskB := 0
	for _, rec := range mailboxRecords(t, conn1, "ea.mbox.task-b.demo") {
		if rec.Type == "task" {
			taskB++
		}
	}
	orphans := taskB - completed - countTaskBeforeCancel(t, c, ids)
	if orphans < 0 {
		t.Fatalf("%d task records for task B, fewer than the %d needed", taskB, taskB-orphans)
	}
	// Every task B beyond the completed orchestrations' own was answered and
	// its result dropped, or skipped by the worker after the cancel.
	ac, err := actor.NewClient(ctx, conn1)
	if err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 30e9, "extra tasks dropped or skipped", func() bool {
		doc, err := ac.State(ctx, records.Ref{Kind: "task-b", ID: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		var ws kinds.TaskState
		if err := doc.Decode(&ws); err != nil {
			t.Fatal(err)
		}
		stale := s1.counter(t, "ea_orchestration_records_dropped_total", "reason", "stale") +
			s2.counter(t, "ea_orchestration_records_dropped_total", "reason", "stale")
		return stale+float64(ws.Skipped) == float64(taskB-completed)
	})
	steps := s1.counter(t, "ea_orchestration_steps_total") + s2.counter(t, "ea_orchestration_steps_total")
	if want := float64(4*completed + 3*cancelled); steps < want || steps > want+float64(cancelled) {
		t.Fatalf("steps counted %v, want %v to %v", steps, want, want+float64(cancelled))
	}
	t.Logf("steps applied by supervisor 1: %v, by supervisor 2: %v; conflicts %v + %v; %d completed, %d cancelled, %d orphan tasks",
		s1.counter(t, "ea_orchestration_steps_total"), s2.counter(t, "ea_orchestration_steps_total"),
		s1.counter(t, "ea_orchestration_conflicts_total"), s2.counter(t, "ea_orchestration_conflicts_total"), completed, cancelled, orphans)
}

// countTaskBeforeCancel counts cancelled orchestrations whose input won the
// race against the cancel (they sent task B before being cancelled).
func countTaskBeforeCancel(t *testing.T, c *supervisor.Client, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		o, err := c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == supervisor.StatusCancelled && o.Steps == 4 {
			n++
		}
	}
	return n
}
