package kv_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/bus"
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
