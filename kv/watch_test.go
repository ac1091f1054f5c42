package kv_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/effectors/effectors/kv"
)

func TestWatch(t *testing.T) {
	t.Parallel()
	f := setup(t, 5)
	ctx := testContext(t)
	baseline := subscriptionGoroutines()
	rev := put(t, ctx, f.st, "counter.c1", counter{N: 1})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := watch(wctx, f.st, "counter.c1")

	expect := func(what string, want kv.Entry[counter]) {
		t.Helper()
		w := next(t, ch)
		if w.err != nil {
			t.Fatalf("%s: %v", what, w.err)
		}
		got := w.e
		if got.Created.IsZero() {
			t.Errorf("%s: created is zero", what)
		}
		got.Created = want.Created
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: watch yielded %+v, want %+v", what, got, want)
		}
	}
	expect("initial value", kv.Entry[counter]{Key: "counter.c1", Value: counter{N: 1}, Revision: rev})

	rev = put(t, ctx, f.st, "counter.c1", counter{N: 2})
	expect("put", kv.Entry[counter]{Key: "counter.c1", Value: counter{N: 2}, Revision: rev})

	rev, err := f.st.Update(ctx, "counter.c1", counter{N: 3, Name: "cas"}, rev)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	expect("update", kv.Entry[counter]{Key: "counter.c1", Value: counter{N: 3, Name: "cas"}, Revision: rev})

	if err := f.st.Delete(ctx, "counter.c1"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	expect("delete", kv.Entry[counter]{Key: "counter.c1", Revision: rev + 1, Deleted: true})

	rev, err = f.st.Create(ctx, "counter.c1", counter{N: 4})
	if err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	expect("create", kv.Entry[counter]{Key: "counter.c1", Value: counter{N: 4}, Revision: rev})

	cancel()
	ended(t, ch)
	eventually(t, "the watcher's goroutine to end", func() bool { return subscriptionGoroutines() <= baseline })
}

func TestWatchMissingKey(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := watch(wctx, f.st, "later")

	// Nothing to yield at first; the first value comes with the first write.
	rev := put(t, ctx, f.st, "later", counter{N: 7})
	w := next(t, ch)
	if w.err != nil || w.e.Key != "later" || w.e.Value.N != 7 || w.e.Revision != rev {
		t.Errorf("watch yielded %+v, %v; want later=7 at revision %d", w.e, w.err, rev)
	}
	cancel()
	ended(t, ch)
}

func TestWatchWildcard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		write   []string // keys written after the initial values, in order
		want    []string // key=N yielded: the initial values in any order, then one change
	}{
		{
			pattern: "counter.*",
			write:   []string{"orders.b", "counter.x.y", "counter.c"},
			want:    []string{"counter.a=1", "counter.b=2", "counter.c=10"},
		},
		{
			pattern: "counter.>",
			write:   []string{"orders.b", "counter.x.y"},
			want:    []string{"counter.a=1", "counter.b=2", "counter.x.deep=3", "counter.x.y=10"},
		},
		{
			pattern: "*.a",
			write:   []string{"counter.b", "orders.a"},
			want:    []string{"counter.a=1", "orders.a=4", "orders.a=10"},
		},
		{
			pattern: ">",
			write:   []string{"gone"},
			want:    []string{"counter.a=1", "counter.b=2", "counter.x.deep=3", "orders.a=4", "gone=10"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			f := setup(t, 1)
			ctx := testContext(t)
			for i, k := range []string{"counter.a", "counter.b", "counter.x.deep", "orders.a", "gone"} {
				put(t, ctx, f.st, k, counter{N: i + 1})
			}
			if err := f.st.Delete(ctx, "gone"); err != nil { // no current value: not yielded
				t.Fatalf("delete: %v", err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch := watch(wctx, f.st, tc.pattern)

			var got []string
			initial := len(tc.want) - 1
			for range initial {
				w := next(t, ch)
				if w.err != nil {
					t.Fatalf("watch: %v", w.err)
				}
				got = append(got, fmt.Sprintf("%s=%d", w.e.Key, w.e.Value.N))
			}
			for _, k := range tc.write {
				put(t, ctx, f.st, k, counter{N: 10})
			}
			w := next(t, ch)
			if w.err != nil {
				t.Fatalf("watch: %v", w.err)
			}
			got = append(got, fmt.Sprintf("%s=%d", w.e.Key, w.e.Value.N))
			if !sameSet(got[:initial], tc.want[:initial]) || got[initial] != tc.want[initial] {
				t.Errorf("watch %s yielded %q, want %q", tc.pattern, got, tc.want)
			}
			cancel()
			ended(t, ch)
		})
	}
}

// sameSet reports whether a and b hold the same strings in any order.
func sameSet(a, b []string) bool {
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestWatchInvalidPattern(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	for _, pattern := range []string{"", "a..b", "a.>.b", "a b", ".a"} {
		var errs []error
		for _, err := range f.st.Watch(ctx, pattern) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], kv.ErrInvalidKey) {
			t.Errorf("watch %q yielded %v, want one ErrInvalidKey and the end", pattern, errs)
		}
	}
}

func TestWatchDecodeError(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	rev, err := f.raw.Put(ctx, "bad", []byte{0xc1})
	if err != nil {
		t.Fatalf("raw put: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := watch(wctx, f.st, ">")

	w := next(t, ch)
	var de *kv.DecodeError
	if !errors.As(w.err, &de) || de.Key != "bad" || de.Revision != rev {
		t.Fatalf("watch yielded %+v, %v; want a DecodeError for bad at revision %d", w.e, w.err, rev)
	}
	if w.e.Key != "bad" || w.e.Revision != rev {
		t.Errorf("entry with the decode error = %+v, want key and revision set", w.e)
	}
	put(t, ctx, f.st, "good", counter{N: 1}) // the watch goes on
	if w := next(t, ch); w.err != nil || w.e.Key != "good" {
		t.Errorf("after a decode error watch yielded %+v, %v; want good", w.e, w.err)
	}
	cancel()
	ended(t, ch)
}

// TestWatchBreak stops a watch while the client still has hundreds of
// changes to deliver: the watcher must be released all the same.
func TestWatchBreak(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	baseline := subscriptionGoroutines()
	for i := range 600 { // more than the watcher's buffer
		put(t, ctx, f.st, fmt.Sprintf("k.%d", i), counter{N: i})
	}
	tests := []struct {
		name string
		stop int // entries to take before breaking
	}{{"at once", 1}, {"midway", 300}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for e, err := range f.st.Watch(ctx, "k.*") {
				if err != nil {
					t.Fatalf("watch: %v", err)
				}
				if e.Value.N != n {
					t.Fatalf("entry %d = %+v, want N %d", n, e, n)
				}
				if n++; n == tc.stop {
					break
				}
			}
			eventually(t, "the watcher's goroutine to end", func() bool { return subscriptionGoroutines() <= baseline })
		})
	}
}
