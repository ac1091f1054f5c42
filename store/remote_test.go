package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// pages reads every page of q from r.
func pages(t *testing.T, r store.Reader, q store.Query) []store.Record {
	t.Helper()
	var out []store.Record
	for range 1000 {
		p, err := r.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Records...)
		if !p.More {
			return out
		}
		q.Cursor = p.Cursor
	}
	t.Fatal("too many pages")
	return nil
}

func sameRecord(a, b store.Record) bool {
	return a.ID == b.ID && a.Type == b.Type && a.From == b.From && a.Process == b.Process &&
		a.Subject == b.Subject && a.Seq == b.Seq && a.Stream == b.Stream && a.Box == b.Box &&
		a.Effector == b.Effector && a.Stored.Equal(b.Stored) && a.Time.Equal(b.Time) &&
		a.ContentType == b.ContentType && bytes.Equal(a.Payload, b.Payload) && a.Invalid == b.Invalid
}

// The service answers what the client answers: records, cursors, counts,
// effectors and errors.
func TestRemoteMatchesClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixture(t, e)
	putDoc(t, e, actor.Document{ID: "a", Kind: "w", Status: actor.StatusIdle, Updated: time.Now().UTC()})
	ctx := context.Background()
	remote, err := store.NewRemote(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	w2 := records.Ref{Kind: "w", ID: "2"}
	for _, q := range []store.Query{
		{Limit: 7},
		{Process: "p2", Limit: 3, Order: store.NewestFirst},
		{Effector: w2, Limit: 4},
		{Type: "result", Box: store.BoxOutbox, Limit: 5},
		{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour), Limit: 11, Order: store.NewestFirst},
	} {
		local, viaNATS := pages(t, e.client, q), pages(t, remote, q)
		if len(local) != len(viaNATS) || len(local) == 0 {
			t.Fatalf("%+v: %d records locally, %d over NATS", q, len(local), len(viaNATS))
		}
		for i := range local {
			if !sameRecord(local[i], viaNATS[i]) {
				t.Fatalf("%+v: record %d:\n local %+v\n  nats %+v", q, i, local[i], viaNATS[i])
			}
		}
		n1, err1 := e.client.Count(ctx, q)
		n2, err2 := remote.Count(ctx, q)
		if n1 != n2 || err1 != nil || err2 != nil {
			t.Fatalf("%+v: count %d %v / %d %v", q, n1, err1, n2, err2)
		}
	}
	r1, _ := e.client.Get(ctx, "r33")
	r2, err := remote.Get(ctx, "r33")
	if err != nil || !sameRecord(r1, r2) {
		t.Fatalf("get: %+v %v", r2, err)
	}
	p1, _ := e.client.Effectors(ctx, store.EffectorQuery{Kind: "w"})
	p2, err := remote.Effectors(ctx, store.EffectorQuery{Kind: "w"})
	if err != nil || len(p2.Effectors) != 1 || p2.Effectors[0].Ref() != p1.Effectors[0].Ref() || p2.Effectors[0].Revision != p1.Effectors[0].Revision || p2.Cursor != p1.Cursor {
		t.Fatalf("effectors: %+v %v", p2, err)
	}

	sentinels := []error{store.ErrInvalid, store.ErrBadCursor, store.ErrPageTooLarge, store.ErrUnknownKind, store.ErrNotFound, store.ErrUnavailable}
	check := func(what string, local, viaNATS error) {
		t.Helper()
		if local == nil || viaNATS == nil {
			t.Fatalf("%s: errors %v / %v", what, local, viaNATS)
		}
		var se *store.ServiceError
		if !errors.As(viaNATS, &se) {
			t.Fatalf("%s: %T over NATS", what, viaNATS)
		}
		for _, s := range sentinels {
			if errors.Is(local, s) != errors.Is(viaNATS, s) {
				t.Fatalf("%s: %v matches %v locally: %v, over NATS (%v): %v", what, s, local, errors.Is(local, s), viaNATS, errors.Is(viaNATS, s))
			}
		}
	}
	for _, q := range []store.Query{{Limit: 5000}, {Cursor: "zz"}, {Box: "x"}} {
		_, err1 := e.client.Query(ctx, q)
		_, err2 := remote.Query(ctx, q)
		check(fmt.Sprintf("query %+v", q), err1, err2)
	}
	_, err1 := e.client.Get(ctx, "absent")
	_, err2 := remote.Get(ctx, "absent")
	check("get", err1, err2)
	_, err1 = e.client.Effectors(ctx, store.EffectorQuery{Kind: "nobody"})
	_, err2 = remote.Effectors(ctx, store.EffectorQuery{Kind: "nobody"})
	check("effectors", err1, err2)
}

func TestRemoteWithoutServer(t *testing.T) {
	t.Parallel()
	conn := bustest.NewServer(t).Connect(t)
	remote, err := store.NewRemote(conn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Query(context.Background(), store.Query{})
	isErr(t, err, store.ErrUnavailable)
}
