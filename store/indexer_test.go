package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/store"
)

// runServer runs a store server on its own connection until the test ends.
func runServer(t *testing.T, srv *bustest.Server) *store.Client {
	t.Helper()
	conn := srv.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := store.NewServer(ctx, conn, store.ServerOptions{})
	if err != nil {
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

// Two servers share the indexer's durable consumers: every record is
// indexed exactly once, and both answer.
func TestTwoServersIndexOnce(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	a, b := runServer(t, srv), runServer(t, srv)
	e := &env{conn: srv.Connect(t), client: a}
	waitService(t, e.conn)
	var rs []rec
	for i := range 400 {
		rs = append(rs, rec{subject: fmt.Sprintf("ea.mbox.w.%d", i%7), id: fmt.Sprintf("x%03d", i), typ: "t", process: fmt.Sprintf("p%d", i%4)})
	}
	publish(t, e.conn, rs...)
	e.indexed(t)
	for _, c := range []*store.Client{a, b} {
		for p := range 4 {
			want := ids(rs, func(r rec) bool { return r.process == fmt.Sprintf("p%d", p) })
			// Two indexers write side by side: each stream's records come in
			// indexing order, which may interleave their batches.
			got := all(t, c, store.Query{Process: fmt.Sprintf("p%d", p), Limit: 37})
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("process p%d: %d records, want %d (duplicates or gaps)", p, len(got), len(want))
			}
		}
		n, err := c.Count(context.Background(), store.Query{Type: "t"})
		if err != nil || n != 400 {
			t.Fatalf("count by type %d, %v", n, err)
		}
	}
}

// The indexer resumes after the NATS server restarts: nothing published
// meanwhile is missed.
func TestIndexerSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	c := runServer(t, srv)
	e := &env{conn: srv.Connect(t), client: c}
	publish(t, e.conn, rec{subject: "ea.mbox.w.1", id: "before", process: "p"})
	e.indexed(t)
	srv.Restart(t)
	eventually(t, func() error {
		if !e.conn.Connected() {
			return fmt.Errorf("not reconnected")
		}
		_, err := e.conn.JetStream().Publish(context.Background(), "ea.out.w.1", nil)
		return err
	})
	publish(t, e.conn, rec{subject: "ea.mbox.w.1", id: "after", process: "p"})
	eventually(t, func() error {
		got := all(t, c, store.Query{Process: "p"})
		if !slices.Equal(got, []string{"before", "after"}) {
			return fmt.Errorf("process p: %v", got)
		}
		return nil
	})
}

// An index entry written twice (a record redelivered to the indexer after
// the duplicate window) gives the record once.
func TestDuplicateEntryOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	publish(t, e.conn, rec{subject: "ea.mbox.w.1", id: "one", process: "dup"})
	e.indexed(t)
	copied := false
	for shard := range 16 {
		s, err := e.conn.JetStream().Stream(ctx, fmt.Sprintf("EA_IDX_PROC_%d", shard))
		if err != nil {
			t.Fatal(err)
		}
		subject := fmt.Sprintf("ea.idx.proc.%d.dup", shard)
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			continue
		}
		if _, err := e.conn.JetStream().Publish(ctx, subject, m.Data); err != nil {
			t.Fatal(err)
		}
		copied = true
	}
	if !copied {
		t.Fatal("no process entry found")
	}
	for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
		if got := all(t, e.client, store.Query{Process: "dup", Order: order}); !slices.Equal(got, []string{"one"}) {
			t.Fatalf("%q: %v", order, got)
		}
	}
}
