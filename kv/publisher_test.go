package kv_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/kv"
)

// TestUpdateWithPublisher checks that Update written through a Publisher
// behaves as the bucket's own Update: the same revisions, values and errors.
func TestUpdateWithPublisher(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	nc, err := nats.Connect(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := bus.NewPublisher(nc, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	fast := kv.New[counter](f.raw, kv.WithPublisher(pub))

	for name, st := range map[string]*kv.Store[counter]{"bucket": f.st, "publisher": fast} {
		t.Run(name, func(t *testing.T) {
			k := "upd." + name
			rev := put(t, ctx, f.st, k, counter{N: 1})
			next, err := st.Update(ctx, k, counter{N: 2, Name: "two"}, rev)
			if err != nil || next <= rev {
				t.Fatalf("update current = %d, %v; want a revision above %d", next, err, rev)
			}
			got, err := f.st.Get(ctx, k)
			if err != nil || got.Revision != next || got.Value.N != 2 || got.Value.Name != "two" {
				t.Fatalf("get after update = %+v, %v; want N 2 at revision %d", got, err, next)
			}

			_, err = st.Update(ctx, k, counter{N: 3}, rev) // stale
			var ce *kv.ConflictError
			if !errors.As(err, &ce) || ce.Key != k || ce.Expected != rev || !kv.IsConflict(err) {
				t.Fatalf("update stale: err = %v (%T), want a *kv.ConflictError for %s at %d", err, err, k, rev)
			}
			if !strings.Contains(err.Error(), "kv test:") {
				t.Errorf("error %q does not name the bucket", err)
			}

			_, err = st.Update(ctx, k+".missing", counter{N: 1}, 1)
			if !errors.Is(err, kv.ErrConflict) {
				t.Errorf("update missing with a revision: err = %v, want ErrConflict", err)
			}
			if _, err := st.Update(ctx, k+".fresh", counter{N: 1}, 0); err != nil {
				t.Errorf("update missing with revision 0: %v", err)
			}
			for _, bad := range []string{"", "a..b", "a.*", "a b"} {
				if _, err := st.Update(ctx, bad, counter{}, 1); !errors.Is(err, kv.ErrInvalidKey) {
					t.Errorf("update %q: err = %v, want ErrInvalidKey", bad, err)
				}
			}
		})
	}
}

// TestUpdateOnceAnswersARetry: a write sent again with the same id after
// an attempt that was stored (its answer lost, say) is answered with that
// attempt's revision on a replicated bucket of a cluster, where JetStream
// checks the id before the expected revision; on a single server the
// revision is checked first and the retry is a conflict, as Update's. A
// write with another id at the same revision is a conflict on both, and
// UpdateOnce refuses a store without a publisher.
func TestUpdateOnceAnswersARetry(t *testing.T) {
	t.Parallel()
	single := bustest.NewServer(t)
	cluster := bustest.NewCluster(t, 3)
	for _, c := range []struct {
		name      string
		url       string
		replicas  int
		duplicate bool // the retry is answered, not refused
	}{
		{"cluster", cluster.URL(), 3, true},
		{"single", single.URL, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t)
			nc, err := nats.Connect(c.url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "once", Replicas: c.replicas})
			if err != nil {
				t.Fatal(err)
			}
			pub, err := bus.NewPublisher(nc, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pub.Close() })
			st := kv.New[counter](raw, kv.WithPublisher(pub))
			rev := put(t, ctx, kv.New[counter](raw), "k", counter{N: 1})
			first, err := st.UpdateOnce(ctx, "k", counter{N: 2}, rev, "k:2")
			if err != nil || first <= rev {
				t.Fatalf("UpdateOnce = %d, %v; want a revision above %d", first, err, rev)
			}
			again, err := st.UpdateOnce(ctx, "k", counter{N: 2}, rev, "k:2")
			switch {
			case c.duplicate && (err != nil || again != first):
				t.Fatalf("UpdateOnce sent again = %d, %v; want the first attempt's revision %d", again, err, first)
			case !c.duplicate && !kv.IsConflict(err):
				t.Fatalf("UpdateOnce sent again on one server = %d, %v; want a conflict", again, err)
			}
			if _, err := st.UpdateOnce(ctx, "k", counter{N: 3}, rev, "k:3"); !kv.IsConflict(err) {
				t.Fatalf("UpdateOnce with another id at a stale revision: %v, want a conflict", err)
			}
			if got, err := st.Get(ctx, "k"); err != nil || got.Revision != first || got.Value.N != 2 {
				t.Fatalf("Get = %+v, %v; want N 2 at revision %d, stored once", got, err, first)
			}
			if _, err := kv.New[counter](raw).UpdateOnce(ctx, "k", counter{N: 4}, first, "k:4"); err == nil || !strings.Contains(err.Error(), "WithPublisher") {
				t.Fatalf("UpdateOnce without a publisher: %v, want an error naming WithPublisher", err)
			}
		})
	}
}
