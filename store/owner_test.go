package store_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// TestOwner: records, effectors and orchestrations carry an owner; queries
// (through the owner index), counts and lists filter by it, from Go and
// over the service; a bad owner is refused everywhere.
func TestOwner(t *testing.T) {
	t.Parallel()
	e, sc := orchEnv(t)
	ctx := context.Background()
	actortest.StartNode(t, e.conn, actor.Options{ShutdownGrace: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}, kinds.Counter())
	ac, err := actor.NewClient(ctx, e.conn)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{"c1": "alice", "c2": "bob", "c3": ""}
	for id, owner := range owners {
		doc, err := ac.CreateOwned(ctx, records.Ref{Kind: "counter", ID: id}, nil, owner)
		if err != nil || doc.Owner != owner {
			t.Fatalf("create %s for %q: %+v %v", id, owner, doc, err)
		}
	}
	if _, err := ac.CreateOwned(ctx, records.Ref{Kind: "counter", ID: "c4"}, nil, "a b"); err == nil {
		t.Fatal("create with owner \"a b\": no error")
	}
	const n = 5
	for id, owner := range owners {
		for range n {
			rec, _ := records.New("inc", nil)
			rec.Owner = owner
			if _, err := ac.Send(ctx, records.Ref{Kind: "counter", ID: id}, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	oid, err := sc.StartOwned(ctx, "demo", map[string]any{"text": "hi"}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	waitOrch(t, sc, oid, supervisor.StatusWaiting)
	// Every count record emitted (inherits the owner), then indexed.
	actortest.Eventually(t, 30*time.Second, "counters done", func() bool {
		for id := range owners {
			doc, err := ac.State(ctx, records.Ref{Kind: "counter", ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Seq == 0 {
				return false
			}
			var s kinds.CounterState
			if err := doc.Decode(&s); err != nil || s.Count != n {
				return false
			}
		}
		return true
	})
	e.indexed(t)

	remote, err := store.NewRemote(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.Reader{e.client, remote} {
		p, err := r.Query(ctx, store.Query{Owner: "bob", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) != 2*n {
			t.Fatalf("%T owner bob: %d records, want %d (inputs and outputs)", r, len(p.Records), 2*n)
		}
		for _, rec := range p.Records {
			if rec.Owner != "bob" || rec.Effector.ID != "c2" {
				t.Fatalf("%T owner bob: record %+v", r, rec.Record)
			}
		}
		p, err = r.Query(ctx, store.Query{Owner: "alice", Type: "status", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) == 0 || p.Records[0].Process != oid {
			t.Fatalf("%T owner alice, type status: %d records", r, len(p.Records))
		}
		p, err = r.Query(ctx, store.Query{Owner: "alice", Type: "task", Limit: 1000})
		if err != nil || len(p.Records) != 1 || p.Records[0].Process != oid {
			t.Fatalf("%T owner alice, type task: %d records (%v), want the task sent to task-a", r, len(p.Records), err)
		}
		cnt, err := r.Count(ctx, store.Query{Owner: "bob"})
		if err != nil || cnt != 2*n {
			t.Fatalf("%T count owner bob: %d %v", r, cnt, err)
		}
		ep, err := r.Effectors(ctx, store.EffectorQuery{Kind: "counter", Owner: "alice"})
		if err != nil || len(ep.Effectors) != 1 || ep.Effectors[0].ID != "c1" || ep.Effectors[0].Owner != "alice" {
			t.Fatalf("%T effectors of alice: %+v %v", r, ep.Effectors, err)
		}
		op, err := r.Orchestrations(ctx, store.OrchQuery{Owner: "alice"})
		if err != nil || len(op.Orchestrations) != 1 || op.Orchestrations[0].ID != oid || op.Orchestrations[0].Owner != "alice" {
			t.Fatalf("%T orchestrations of alice: %+v %v", r, op.Orchestrations, err)
		}
		op, err = r.Orchestrations(ctx, store.OrchQuery{Owner: "bob"})
		if err != nil || len(op.Orchestrations) != 0 {
			t.Fatalf("%T orchestrations of bob: %+v %v", r, op.Orchestrations, err)
		}
		_, err = r.Query(ctx, store.Query{Owner: "a b"})
		isErr(t, err, store.ErrInvalid)
		_, err = r.Effectors(ctx, store.EffectorQuery{Kind: "counter", Owner: "a\x01"})
		isErr(t, err, store.ErrInvalid)
		_, err = r.Orchestrations(ctx, store.OrchQuery{Owner: "a b"})
		isErr(t, err, store.ErrInvalid)
		// A cursor of one owner's query does not continue another's.
		p, err = r.Query(ctx, store.Query{Owner: "bob", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Query(ctx, store.Query{Owner: "alice", Limit: 1, Cursor: p.Cursor})
		isErr(t, err, store.ErrBadCursor)
	}
	if _, err := sc.StartOwned(ctx, "demo", nil, "a b"); err == nil {
		t.Fatal("start with owner \"a b\": no error")
	}
}
