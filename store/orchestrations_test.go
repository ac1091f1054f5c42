package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// orchEnv runs workers and a supervisor with the demo orchestration beside
// the store.
func orchEnv(t *testing.T) (*env, *supervisor.Client) {
	t.Helper()
	e := newEnv(t)
	quiet := slog.New(slog.DiscardHandler)
	actortest.StartNode(t, e.conn, actor.Options{ShutdownGrace: 5 * time.Second, Logger: quiet}, kinds.TaskA(), kinds.TaskB())
	s, err := supervisor.New(e.conn, supervisor.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	def, err := demo.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(def); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	actortest.Eventually(t, 30*time.Second, "supervisor ready", s.Ready)
	c, err := supervisor.NewClient(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func waitOrch(t *testing.T, c *supervisor.Client, id string, want supervisor.Status) {
	t.Helper()
	actortest.Eventually(t, 30*time.Second, id+" "+string(want), func() bool {
		o, err := c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return o.Status == want
	})
}

// TestOrchestrations lists orchestrations by status and name, a page at a
// time, from Go and over the service, and refuses bad input.
func TestOrchestrations(t *testing.T) {
	t.Parallel()
	e, c := orchEnv(t)
	ctx := context.Background()
	ids := make([]string, 3)
	for i := range ids {
		id, err := c.Start(ctx, "demo", map[string]any{"text": "hello"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
		waitOrch(t, c, id, supervisor.StatusWaiting)
	}
	if err := c.Cancel(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Input(ctx, ids[1], map[string]string{"note": "n"}); err != nil {
		t.Fatal(err)
	}
	waitOrch(t, c, ids[1], supervisor.StatusCompleted)

	remote, err := store.NewRemote(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.Reader{e.client, remote} {
		for _, tc := range []struct {
			q    store.OrchQuery
			want []string
		}{
			{store.OrchQuery{Status: "CANCELLED"}, ids[:1]},
			{store.OrchQuery{Status: "COMPLETED"}, ids[1:2]},
			{store.OrchQuery{Status: "WAITING", Name: "demo"}, ids[2:]},
			{store.OrchQuery{Name: "other"}, nil},
		} {
			p, err := r.Orchestrations(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range p.Orchestrations {
				got = append(got, o.ID)
				if o.Name != "demo" || o.Revision == 0 || o.Created.IsZero() {
					t.Fatalf("orchestration %+v", o)
				}
			}
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Fatalf("%T %+v: %v, want %v", r, tc.q, got, tc.want)
			}
		}
		// Paged one at a time: all three, each once, in the order last
		// changed (the completed one last).
		seen := map[string]bool{}
		var last string
		q := store.OrchQuery{Name: "demo", Limit: 1}
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("more than 10 pages of 3 orchestrations")
			}
			p, err := r.Orchestrations(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range p.Orchestrations {
				if seen[o.ID] {
					t.Fatalf("%s listed twice", o.ID)
				}
				seen[o.ID], last = true, o.ID
			}
			if !p.More {
				break
			}
			q.Cursor = p.Cursor
		}
		if len(seen) != 3 || last != ids[1] {
			t.Fatalf("%T paged: %v, last %s, want all 3 ending with %s", r, seen, last, ids[1])
		}
		// Bad input.
		p, err := r.Orchestrations(ctx, store.OrchQuery{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Orchestrations(ctx, store.OrchQuery{Status: "bogus"})
		isErr(t, err, store.ErrInvalid)
		_, err = r.Orchestrations(ctx, store.OrchQuery{Name: "no spaces"})
		isErr(t, err, store.ErrInvalid)
		_, err = r.Orchestrations(ctx, store.OrchQuery{Limit: store.MaxLimit + 1})
		isErr(t, err, store.ErrInvalid, store.ErrPageTooLarge)
		_, err = r.Orchestrations(ctx, store.OrchQuery{Cursor: "junk"})
		isErr(t, err, store.ErrInvalid, store.ErrBadCursor)
		_, err = r.Orchestrations(ctx, store.OrchQuery{Status: "WAITING", Cursor: p.Cursor})
		isErr(t, err, store.ErrInvalid, store.ErrBadCursor)
	}
}

// TestWatchOrchestration follows one orchestration's status from its
// current state to the end, then resumes from a revision and sees the
// changes after it again.
func TestWatchOrchestration(t *testing.T) {
	t.Parallel()
	e, c := orchEnv(t)
	ctx := context.Background()
	id, err := c.Start(ctx, "demo", map[string]any{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	waitOrch(t, c, id, supervisor.StatusWaiting)
	w, err := e.client.WatchOrchestrations(ctx, store.OrchWatchOptions{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func(w *store.OrchWatcher) store.OrchEvent {
		t.Helper()
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
			return ev
		case <-time.After(30 * time.Second):
			t.Fatal("no event in 30s")
		}
		return store.OrchEvent{}
	}
	first := next(w)
	if first.ID != id || first.Orchestration.Status != "WAITING" || first.Revision == 0 {
		t.Fatalf("first event %+v", first)
	}
	if _, err := c.Input(ctx, id, map[string]string{"note": "n"}); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	var revs []uint64
	for len(statuses) == 0 || statuses[len(statuses)-1] != "COMPLETED" {
		ev := next(w)
		statuses, revs = append(statuses, ev.Orchestration.Status), append(revs, ev.Revision)
	}
	if len(statuses) != 2 || statuses[0] != "RUNNING" {
		t.Fatalf("statuses after input %v, want RUNNING then COMPLETED", statuses)
	}
	w.Stop()
	// Resume after the first event: the same two changes again.
	w2, err := e.client.WatchOrchestrations(ctx, store.OrchWatchOptions{ID: id, From: first.Revision + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	for i, want := range revs {
		if ev := next(w2); ev.Revision != want || ev.Orchestration.Status != statuses[i] {
			t.Fatalf("resumed event %d: revision %d %s, want %d %s", i, ev.Revision, ev.Orchestration.Status, want, statuses[i])
		}
	}
	if _, err := e.client.WatchOrchestrations(ctx, store.OrchWatchOptions{ID: "a.b"}); err == nil {
		t.Fatal("watch of id a.b: no error")
	}
}
