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

// A backlog is indexed in batches, several entries to an index message:
// pages of any size end inside messages and go on from there in both
// orders, with no record twice or missed; counts count entries.
func TestPagesInsideIndexMessages(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	var rs []rec
	for i := range 60 {
		typ := "even"
		if i%2 == 1 {
			typ = "odd"
		}
		rs = append(rs, rec{subject: fmt.Sprintf("ea.out.w.%d", i%3), id: fmt.Sprintf("b%02d", i), typ: typ, process: "bulk"})
	}
	publish(t, conn, rs...) // before any indexer runs: one backlog
	c := runServer(t, srv)
	e := &env{conn: conn, client: c}
	e.indexed(t)
	ctx := context.Background()
	msgs := uint64(0)
	for shard := range 16 {
		s, err := conn.JetStream().Stream(ctx, fmt.Sprintf("EA_IDX_PROC_%d", shard))
		if err != nil {
			t.Fatal(err)
		}
		msgs += s.CachedInfo().State.Msgs
	}
	if msgs == 0 || msgs >= 60 {
		t.Fatalf("60 process entries in %d index messages: want several entries to a message", msgs)
	}
	want := ids(rs, func(rec) bool { return true })
	rev := slices.Clone(want)
	slices.Reverse(rev)
	odd := ids(rs, func(r rec) bool { return r.typ == "odd" })
	for _, limit := range []int{1, 7, 59, 60, 100} {
		if got := all(t, c, store.Query{Process: "bulk", Limit: limit}); !slices.Equal(got, want) {
			t.Errorf("oldest first, pages of %d: %v", limit, got)
		}
		if got := all(t, c, store.Query{Process: "bulk", Limit: limit, Order: store.NewestFirst}); !slices.Equal(got, rev) {
			t.Errorf("newest first, pages of %d: %v", limit, got)
		}
		if got := all(t, c, store.Query{Process: "bulk", Type: "odd", Limit: limit}); !slices.Equal(got, odd) {
			t.Errorf("process and type, pages of %d: %v", limit, got)
		}
	}
	for q, n := range map[*store.Query]uint64{{Process: "bulk"}: 60, {Type: "odd"}: 30, {Process: "bulk", Type: "even"}: 30} {
		if got, err := c.Count(ctx, *q); err != nil || got != n {
			t.Errorf("count %+v: %d, %v; want %d", *q, got, err, n)
		}
	}
	// A cursor at the end, oldest first, reads what is indexed later.
	p, err := c.Query(ctx, store.Query{Process: "bulk", Limit: 1000})
	if err != nil || len(p.Records) != 60 || p.More {
		t.Fatalf("one page of all: %d records, more %v, %v", len(p.Records), p.More, err)
	}
	publish(t, conn, rec{subject: "ea.out.w.1", id: "later", typ: "odd", process: "bulk"})
	eventually(t, func() error {
		p, err := c.Query(ctx, store.Query{Process: "bulk", Limit: 1000, Cursor: p.Cursor})
		if err != nil || len(p.Records) != 1 || p.Records[0].ID != "later" {
			return fmt.Errorf("after the end: %d records, %v", len(p.Records), err)
		}
		return nil
	})
}
