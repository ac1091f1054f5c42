package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// env is a provisioned server with a store server running.
type env struct {
	conn   *bus.Conn
	client *store.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := bustest.NewServer(t)
	return startEnv(t, srv.Connect(t))
}

// newGroupsEnv is newEnv on a deployment with groups stream groups over 8
// partitions (docs/layout.md).
func newGroupsEnv(t testing.TB, groups int) *env {
	t.Helper()
	srv := bustest.NewServer(t)
	srv.MapPartitions(t, 8)
	return startEnv(t, srv.Connect(t, bus.Config{Partitions: 8, Groups: groups}))
}

// startEnv runs a store server on conn.
func startEnv(t testing.TB, conn *bus.Conn) *env {
	t.Helper()
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
	waitService(t, conn)
	return &env{conn: conn, client: s.Client()}
}

func waitService(t testing.TB, conn *bus.Conn) {
	t.Helper()
	eventually(t, func() error {
		_, err := conn.NATS().Request(conn.Names().Prefix()+".store.kinds", nil, time.Second)
		return err
	})
}

func eventually(t testing.TB, f func() error) {
	t.Helper()
	// A deadline, not a wait: it passes as soon as f does. Generous because
	// tests run in parallel on small machines.
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached in a minute: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rec is a record to publish.
type rec struct {
	subject string // mailbox or outbox subject as publishers write it
	id      string
	typ     string
	process string
}

func publish(t testing.TB, conn *bus.Conn, rs ...rec) {
	t.Helper()
	ctx := context.Background()
	for _, r := range rs {
		x, err := records.NewJSON(r.typ, map[string]string{"id": r.id})
		if err != nil {
			t.Fatal(err)
		}
		x.ID, x.Process = r.id, r.process
		subject := r.subject
		if ref, ok := conn.Names().RefOf(subject); ok && strings.HasPrefix(subject, conn.Names().Prefix()+".out.") {
			subject = conn.Names().Outbox(ref) // with stream groups, the grouped subject nodes publish
		}
		if _, err := conn.JetStream().PublishMsg(ctx, x.Msg(subject)); err != nil {
			t.Fatalf("publish %s: %v", r.id, err)
		}
	}
}

// indexed waits until the indexer has caught up.
func (e *env) indexed(t testing.TB) {
	t.Helper()
	eventually(t, func() error {
		lag, err := e.client.IndexLag(context.Background())
		if err != nil {
			return err
		}
		if lag != 0 {
			return fmt.Errorf("index lag %d", lag)
		}
		return nil
	})
}

// all pages through q and returns the ids in order.
func all(t testing.TB, c *store.Client, q store.Query) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("more than 1000 pages")
		}
		p, err := c.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) > q.Limit && q.Limit > 0 {
			t.Fatalf("page of %d records, limit %d", len(p.Records), q.Limit)
		}
		for _, r := range p.Records {
			ids = append(ids, r.ID)
		}
		if !p.More {
			return ids
		}
		q.Cursor = p.Cursor
	}
}

func isErr(t testing.TB, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v does not match %v", err, target)
		}
	}
}
