package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// TestRetentionQueries: with a size limit on the log, the oldest records
// go; queries return only what the log still holds (index entries of
// records that went are skipped), Get of a record that went is
// ErrNotFound, a process count still counts the index entries, and the
// index streams follow the log's limits.
// Not parallel: run beside other tests it failed twice in four runs (the
// index lag stayed at 1 for a minute; once Count said 119 of 120 after the
// lag was 0), reported for a look at the indexer under retention.
func TestRetentionQueries(t *testing.T) {
	srv := bustest.NewServer(t)
	ret := bus.Retention{LogMaxAge: 30 * 24 * time.Hour, LogMaxBytes: bus.MinRetentionBytes}
	conn := srv.Connect(t, bus.Config{Retention: ret})
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
	e := &env{conn: conn, client: s.Client()}
	waitService(t, conn)

	const n = 120 // 100 KB each: 12 MB into an 8 MiB outbox stream
	payload := strings.Repeat("x", 100<<10)
	for i := range n {
		rec, err := records.NewJSON("big", payload)
		if err != nil {
			t.Fatal(err)
		}
		rec.ID, rec.Process = fmt.Sprint("r", i), "p"
		if _, err := conn.JetStream().PublishMsg(context.Background(), rec.Msg("ea.out.k.a")); err != nil {
			t.Fatal(err)
		}
	}
	e.indexed(t)
	ids := all(t, e.client, store.Query{Process: "p", Limit: 50})
	if len(ids) == 0 || len(ids) >= n || ids[len(ids)-1] != fmt.Sprint("r", n-1) {
		t.Fatalf("process query after retention: %d records (last %v); want the newest only, fewer than %d", len(ids), ids[len(ids)-1:], n)
	}
	oldest := ids[0]
	for i, id := range ids {
		if want := fmt.Sprint("r", n-len(ids)+i); id != want {
			t.Fatalf("record %d of the query is %s, want %s (a contiguous newest run)", i, id, want)
		}
	}
	if _, err := e.client.Get(context.Background(), "r0"); err == nil {
		t.Fatal("Get of a record the log dropped: no error")
	} else {
		isErr(t, err, store.ErrNotFound)
	}
	if _, err := e.client.Get(context.Background(), oldest); err != nil {
		t.Fatalf("Get of the oldest record kept: %v", err)
	}
	count, err := e.client.Count(context.Background(), store.Query{Process: "p"})
	if err != nil || count != n {
		t.Fatalf("process count %d (%v): want %d, the index entries", count, err, n)
	}
	eff := all(t, e.client, store.Query{Effector: records.Ref{Kind: "k", ID: "a"}, Box: store.BoxOutbox, Limit: 100})
	if len(eff) != len(ids) {
		t.Fatalf("effector query: %d records, process query %d", len(eff), len(ids))
	}
	for _, name := range []string{"EA_IDX_TYPE", "EA_IDX_ID", "EA_IDX_PROC_0"} {
		st, err := conn.JetStream().Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		c := st.CachedInfo().Config
		if c.MaxAge != ret.LogMaxAge || c.MaxBytes != 2*ret.LogMaxBytes {
			t.Errorf("%s: max age %s, max bytes %d; want the log's %s and %d", name, c.MaxAge, c.MaxBytes, ret.LogMaxAge, 2*ret.LogMaxBytes)
		}
	}
}
