package supervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// startStore runs a record store server (indexer and service) on conn.
func startStore(t testing.TB, conn *bus.Conn) *store.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: quiet})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("store server: %v", err)
		}
	})
	return s.Client()
}

// story reads the status records of process id from the record store,
// waiting until the last one shows want.
func story(t testing.TB, sc *store.Client, id string, want supervisor.Status) []supervisor.StatusRecord {
	t.Helper()
	var got []supervisor.StatusRecord
	actortest.Eventually(t, 30*time.Second, "status records of "+id+" ending "+string(want), func() bool {
		got = got[:0]
		q := store.Query{Process: id, Type: supervisor.TypeStatus, Limit: 1000}
		page, err := sc.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			if r.Process != id || r.Effector.String() != "supervisor/"+id || r.ContentType != "application/json" {
				t.Fatalf("status record %+v: want process %s on outbox supervisor/%s, JSON", r.Record, id, id)
			}
			var st supervisor.StatusRecord
			if err := json.Unmarshal(r.Payload, &st); err != nil {
				t.Fatal(err)
			}
			got = append(got, st)
		}
		return len(got) > 0 && got[len(got)-1].Status == want
	})
	return got
}

func describe(recs []supervisor.StatusRecord) string {
	var parts []string
	for _, r := range recs {
		parts = append(parts, fmt.Sprintf("%d:%s:%s:%s", r.Steps, r.Event, r.Status, r.WaitingFor))
	}
	return strings.Join(parts, " ")
}

// TestStatusRecords: a supervisor writes a status record for the start,
// every step, the wait for input, the input and the end, in the
// orchestration's process; a cancel ends the story with CANCELLED.
func TestStatusRecords(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	startSupervisor(t, conn)
	sc := startStore(t, conn)
	c := newClient(t, conn)
	ctx := ctxT(t)

	id, err := c.Start(ctx, "demo", map[string]any{"text": "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, supervisor.StatusWaiting)
	if _, err := c.Input(ctx, id, map[string]string{"note": "n"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, supervisor.StatusCompleted)
	got := describe(story(t, sc, id, supervisor.StatusCompleted))
	want := "1:start:RUNNING:task-a/demo 2:result:WAITING:input 3:input:RUNNING:task-b/demo 4:result:COMPLETED:"
	if got != want {
		t.Fatalf("story of %s:\n got %s\nwant %s", id, got, want)
	}

	id2, err := c.Start(ctx, "demo", map[string]any{"text": "bye"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id2, supervisor.StatusWaiting)
	if err := c.Cancel(ctx, id2); err != nil {
		t.Fatal(err)
	}
	got = describe(story(t, sc, id2, supervisor.StatusCancelled))
	want = "1:start:RUNNING:task-a/demo 2:result:WAITING:input 3:cancel:CANCELLED:"
	if got != want {
		t.Fatalf("story of %s:\n got %s\nwant %s", id2, got, want)
	}
}

// TestStatusRecordCatchUp: when a supervisor died between a change and its
// status record, the next change, on a new supervisor, first writes the
// missing record ("recovered"), so the story has no hole.
func TestStatusRecordCatchUp(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startWorkers(t, conn)
	first := startSupervisorWith(t, conn, func(s *supervisor.Supervisor) {
		s.DieBeforeTell(func(_ string, steps int) bool { return steps == 2 })
	})
	sc := startStore(t, conn)
	c := newClient(t, conn)
	ctx := ctxT(t)

	id, err := c.Start(ctx, "demo", map[string]any{"text": "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, supervisor.StatusWaiting)
	first.Stop(t)
	if got := describe(story(t, sc, id, supervisor.StatusRunning)); got != "1:start:RUNNING:task-a/demo" {
		t.Fatalf("before the catch-up: %s", got)
	}
	startSupervisor(t, conn)
	if _, err := c.Input(ctx, id, map[string]string{"note": "n"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, supervisor.StatusCompleted)
	got := describe(story(t, sc, id, supervisor.StatusCompleted))
	want := "1:start:RUNNING:task-a/demo 2:recovered:WAITING:input 3:input:RUNNING:task-b/demo 4:result:COMPLETED:"
	if got != want {
		t.Fatalf("story of %s:\n got %s\nwant %s", id, got, want)
	}
}
