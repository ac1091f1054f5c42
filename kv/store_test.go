package kv_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	f := setup(t, 10)
	ctx := testContext(t)
	before := time.Now().Add(-time.Minute) // server and test share a clock

	v1 := counter{N: 1, Name: "first", Tags: []string{"a", "b"}}
	rev1, err := f.st.Create(ctx, "counter.c1", v1)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	v2 := counter{N: 2, Name: "second"}
	rev2, err := f.st.Update(ctx, "counter.c1", v2, rev1)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if rev2 <= rev1 {
		t.Fatalf("update revision %d, want > %d", rev2, rev1)
	}
	v3 := counter{N: 3}
	rev3 := put(t, ctx, f.st, "counter.c1", v3)

	got, err := f.st.Get(ctx, "counter.c1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	want := kv.Entry[counter]{Key: "counter.c1", Value: v3, Revision: rev3}
	if got.Created.Before(before) || got.Created.After(time.Now().Add(time.Minute)) {
		t.Errorf("created %v, want about now", got.Created)
	}
	got.Created = time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("get = %+v, want %+v", got, want)
	}

	for _, tc := range []struct {
		rev  uint64
		want counter
	}{{rev1, v1}, {rev2, v2}, {rev3, v3}} {
		e, err := f.st.GetRevision(ctx, "counter.c1", tc.rev)
		if err != nil {
			t.Fatalf("get revision %d: %v", tc.rev, err)
		}
		if e.Revision != tc.rev || !reflect.DeepEqual(e.Value, tc.want) {
			t.Errorf("get revision %d = %+v, want %+v", tc.rev, e, tc.want)
		}
	}
	if got := f.st.Bucket(); got != "test" {
		t.Errorf("bucket = %q, want test", got)
	}
}

// TestErrors checks that each failure maps to the package's sentinel, with
// the bucket, operation and key in the message.
func TestErrors(t *testing.T) {
	t.Parallel()
	f := setup(t, 10)
	ctx := testContext(t)
	st := f.st

	tests := []struct {
		name string
		run  func(key string) error // the last operation's error
		want error                  // nil for success
	}{
		{"get missing", func(k string) error {
			_, err := st.Get(ctx, k)
			return err
		}, kv.ErrNotFound},
		{"get deleted", func(k string) error {
			put(t, ctx, st, k, counter{N: 1})
			if err := st.Delete(ctx, k); err != nil {
				return err
			}
			_, err := st.Get(ctx, k)
			return err
		}, kv.ErrNotFound},
		{"get revision of another key", func(k string) error {
			rev := put(t, ctx, st, k+"-other", counter{N: 1})
			put(t, ctx, st, k, counter{N: 1})
			_, err := st.GetRevision(ctx, k, rev)
			return err
		}, kv.ErrNotFound},
		{"get revision of a delete", func(k string) error {
			rev := put(t, ctx, st, k, counter{N: 1})
			if err := st.Delete(ctx, k); err != nil {
				return err
			}
			_, err := st.GetRevision(ctx, k, rev+1) // the marker: nothing else writes meanwhile
			return err
		}, kv.ErrNotFound},
		{"create twice", func(k string) error {
			if _, err := st.Create(ctx, k, counter{N: 1}); err != nil {
				return err
			}
			_, err := st.Create(ctx, k, counter{N: 2})
			return err
		}, kv.ErrExists},
		{"create after put", func(k string) error {
			put(t, ctx, st, k, counter{N: 1})
			_, err := st.Create(ctx, k, counter{N: 2})
			return err
		}, kv.ErrExists},
		{"create after delete", func(k string) error {
			if _, err := st.Create(ctx, k, counter{N: 1}); err != nil {
				return err
			}
			if err := st.Delete(ctx, k); err != nil {
				return err
			}
			_, err := st.Create(ctx, k, counter{N: 2})
			return err
		}, nil},
		{"update current", func(k string) error {
			rev := put(t, ctx, st, k, counter{N: 1})
			_, err := st.Update(ctx, k, counter{N: 2}, rev)
			return err
		}, nil},
		{"update stale", func(k string) error {
			rev := put(t, ctx, st, k, counter{N: 1})
			put(t, ctx, st, k, counter{N: 2})
			_, err := st.Update(ctx, k, counter{N: 3}, rev)
			return err
		}, kv.ErrConflict},
		{"update missing with a revision", func(k string) error {
			_, err := st.Update(ctx, k, counter{N: 1}, 1)
			return err
		}, kv.ErrConflict},
		{"update missing with revision 0", func(k string) error {
			_, err := st.Update(ctx, k, counter{N: 1}, 0)
			return err
		}, nil},
		{"delete missing", func(k string) error {
			return st.Delete(ctx, k)
		}, nil},
		{"modify missing", func(k string) error {
			_, err := st.Modify(ctx, k, func(c counter) (counter, error) { return c, nil })
			return err
		}, kv.ErrNotFound},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "case." + string(rune('a'+i))
			err := tc.run(key)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil && (!strings.Contains(err.Error(), "kv test:") || !strings.Contains(err.Error(), `"`+key+`"`)) {
				t.Errorf("error %q does not name the bucket and the key %q", err, key)
			}
		})
	}
}

func TestConflictError(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	rev := put(t, ctx, f.st, "k", counter{N: 1})
	put(t, ctx, f.st, "k", counter{N: 2})

	_, err := f.st.Update(ctx, "k", counter{N: 3}, rev)
	var ce *kv.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *kv.ConflictError", err, err)
	}
	if ce.Key != "k" || ce.Expected != rev {
		t.Errorf("conflict = %+v, want key k, expected %d", ce, rev)
	}
	if !errors.Is(err, kv.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = false", err)
	}
	if errors.Is(err, kv.ErrExists) || errors.Is(err, kv.ErrNotFound) {
		t.Errorf("conflict %v also matches another sentinel", err)
	}
	e, err := f.st.Get(ctx, "k")
	if err != nil || e.Value.N != 2 {
		t.Errorf("after a lost update get = %+v, %v; want N 2", e, err)
	}
}

func TestInvalidKey(t *testing.T) {
	t.Parallel()
	// Invalid keys fail before any I/O; the bucket must stay empty.
	f := setup(t, 1)
	ctx := testContext(t)
	st := f.st
	ops := map[string]func(key string) error{
		"get": func(k string) error { _, err := st.Get(ctx, k); return err },
		"get revision": func(k string) error {
			_, err := st.GetRevision(ctx, k, 1)
			return err
		},
		"put":    func(k string) error { _, err := st.Put(ctx, k, counter{}); return err },
		"create": func(k string) error { _, err := st.Create(ctx, k, counter{}); return err },
		"update": func(k string) error { _, err := st.Update(ctx, k, counter{}, 1); return err },
		"modify": func(k string) error {
			_, err := st.Modify(ctx, k, func(c counter) (counter, error) { return c, nil })
			return err
		},
		"delete":  func(k string) error { return st.Delete(ctx, k) },
		"history": func(k string) error { _, err := st.History(ctx, k); return err },
	}
	keys := []string{"", ".a", "a.", "a..b", "a b", "a.*", "a.>", "ä", "a\nb"}
	for name, op := range ops {
		for _, key := range keys {
			err := op(key)
			if !errors.Is(err, kv.ErrInvalidKey) {
				t.Errorf("%s %q: err = %v, want ErrInvalidKey", name, key, err)
			} else if !strings.Contains(err.Error(), strings.ReplaceAll(key, "\n", `\n`)) {
				t.Errorf("%s %q: error %q does not name the key", name, key, err)
			}
		}
	}
	if keys, err := st.Keys(ctx, ""); err != nil || len(keys) != 0 {
		t.Errorf("after invalid writes keys = %q, %v; want none", keys, err)
	}
}

func TestModifyContention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		stores     int // each on its own connection, like separate processes
		writers    int // goroutines per store
		increments int // per goroutine
	}{
		{name: "one store", stores: 1, writers: 8, increments: 50},
		{name: "two stores", stores: 2, writers: 4, increments: 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, 1)
			ctx := testContext(t)
			if _, err := f.st.Create(ctx, "counter.c1", counter{}); err != nil {
				t.Fatalf("create: %v", err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, tc.stores*tc.writers)
			for range tc.stores {
				st, err := kv.Open[counter](ctx, connect(t, f.srv.URL), "test")
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				for range tc.writers {
					wg.Go(func() {
						for range tc.increments {
							_, err := st.Modify(ctx, "counter.c1", func(c counter) (counter, error) {
								c.N++
								return c, nil
							})
							if err != nil {
								errs <- err
								return
							}
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("modify: %v", err)
			}
			e, err := f.st.Get(ctx, "counter.c1")
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if want := tc.stores * tc.writers * tc.increments; e.Value.N != want {
				t.Errorf("n = %d, want %d", e.Value.N, want)
			}
		})
	}
}

func TestModify(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	rev := put(t, ctx, f.st, "k", counter{N: 1, Name: "x"})

	t.Run("writes fn's result", func(t *testing.T) {
		e, err := f.st.Modify(ctx, "k", func(c counter) (counter, error) {
			c.N *= 10
			return c, nil
		})
		if err != nil {
			t.Fatalf("modify: %v", err)
		}
		if e.Key != "k" || !reflect.DeepEqual(e.Value, counter{N: 10, Name: "x"}) || e.Revision <= rev {
			t.Errorf("modify = %+v, want N 10 at a revision > %d", e, rev)
		}
		got, err := f.st.Get(ctx, "k")
		if err != nil || got.Revision != e.Revision || got.Value.N != 10 {
			t.Errorf("get = %+v, %v; want the modified entry %+v", got, err, e)
		}
	})

	t.Run("returns fn's error as is", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := f.st.Modify(ctx, "k", func(c counter) (counter, error) { return c, boom })
		if err != boom {
			t.Errorf("err = %v, want boom itself", err)
		}
	})

	t.Run("gives up after repeated conflicts", func(t *testing.T) {
		calls := 0
		_, err := f.st.Modify(ctx, "k", func(c counter) (counter, error) {
			calls++
			put(t, ctx, f.st, "k", counter{N: -calls}) // another writer wins every time
			return c, nil
		})
		var ce *kv.ConflictError
		if !errors.As(err, &ce) || ce.Key != "k" {
			t.Fatalf("err = %v, want a *ConflictError for k", err)
		}
		if calls != 16 {
			t.Errorf("fn ran %d times, want 16", calls)
		}
	})

	t.Run("stops when ctx is done", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		_, err := f.st.Modify(cctx, "k", func(c counter) (counter, error) {
			cancel()
			put(t, ctx, f.st, "k", counter{N: 1}) // force a retry
			return c, nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestHistory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		history uint8
		puts    int
		want    int
	}{
		{history: 1, puts: 3, want: 1},
		{history: 5, puts: 3, want: 3},
		{history: 5, puts: 8, want: 5},
		{history: jetstream.KeyValueMaxHistory, puts: 70, want: jetstream.KeyValueMaxHistory},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("history %d puts %d", tc.history, tc.puts), func(t *testing.T) {
			f := setup(t, tc.history)
			ctx := testContext(t)
			revs := make([]uint64, tc.puts)
			for i := range tc.puts {
				revs[i] = put(t, ctx, f.st, "k", counter{N: i})
				put(t, ctx, f.st, "other", counter{N: i}) // interleaved, not in k's history
			}
			h, err := f.st.History(ctx, "k")
			if err != nil {
				t.Fatalf("history: %v", err)
			}
			if len(h) != tc.want {
				t.Fatalf("history has %d entries, want %d", len(h), tc.want)
			}
			for i, e := range h {
				n := tc.puts - tc.want + i // oldest kept first
				if e.Key != "k" || e.Value.N != n || e.Revision != revs[n] || e.Deleted || e.Created.IsZero() {
					t.Errorf("history[%d] = %+v, want N %d at revision %d", i, e, n, revs[n])
				}
			}
		})
	}

	t.Run("delete markers and missing keys", func(t *testing.T) {
		f := setup(t, 10)
		ctx := testContext(t)
		put(t, ctx, f.st, "k", counter{N: 1})
		if err := f.st.Delete(ctx, "k"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		put(t, ctx, f.st, "k", counter{N: 2})
		h, err := f.st.History(ctx, "k")
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		var got []string
		for _, e := range h {
			if e.Deleted {
				got = append(got, "deleted")
			} else {
				got = append(got, e.Key+"="+string(rune('0'+e.Value.N)))
			}
		}
		if want := []string{"k=1", "deleted", "k=2"}; !reflect.DeepEqual(got, want) {
			t.Errorf("history = %q, want %q", got, want)
		}
		if _, err := f.st.History(ctx, "missing"); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("history of a missing key: err = %v, want ErrNotFound", err)
		}
	})
}

func TestDecodeError(t *testing.T) {
	t.Parallel()
	f := setup(t, 5)
	ctx := testContext(t)
	tests := []struct {
		name string
		data []byte
	}{
		{"not msgpack", []byte{0xc1}}, // 0xc1 is never used by msgpack
		{"a string", []byte{0xa5, 'h', 'e', 'l', 'l', 'o'}},
		{"empty", nil},
		{"truncated map", []byte{0x81, 0xa1, 'n'}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "bad." + string(rune('a'+i))
			rev, err := f.raw.Put(ctx, key, tc.data)
			if err != nil {
				t.Fatalf("raw put: %v", err)
			}
			check := func(op string, err error) {
				t.Helper()
				var de *kv.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("%s: err = %v, want a *kv.DecodeError", op, err)
				}
				if de.Key != key || de.Revision != rev || de.Type != "kv_test.counter" || de.Err == nil {
					t.Errorf("%s: decode error = %+v, want key %s revision %d type kv_test.counter", op, de, key, rev)
				}
				if msg := err.Error(); !strings.Contains(msg, key) || !strings.Contains(msg, "type change") {
					t.Errorf("%s: message %q does not name the key and suggest a type change", op, msg)
				}
			}
			_, err = f.st.Get(ctx, key)
			check("get", err)
			_, err = f.st.GetRevision(ctx, key, rev)
			check("get revision", err)
			_, err = f.st.History(ctx, key)
			check("history", err)
			_, err = f.st.Modify(ctx, key, func(c counter) (counter, error) {
				t.Error("modify called fn on an undecodable value")
				return c, nil
			})
			check("modify", err)

			// Overwriting repairs the key.
			put(t, ctx, f.st, key, counter{N: 1})
			if e, err := f.st.Get(ctx, key); err != nil || e.Value.N != 1 {
				t.Errorf("after put get = %+v, %v", e, err)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	if keys, err := f.st.Keys(ctx, ""); err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("keys of an empty bucket = %#v, %v; want an empty slice", keys, err)
	}
	for _, k := range []string{"counter.b", "counter.a", "counter.x.y", "orders.1", "gone.1", "counter.a"} {
		put(t, ctx, f.st, k, counter{})
	}
	if err := f.st.Delete(ctx, "gone.1"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	tests := []struct {
		filter string
		want   []string
		err    error
	}{
		{"", []string{"counter.a", "counter.b", "counter.x.y", "orders.1"}, nil},
		{">", []string{"counter.a", "counter.b", "counter.x.y", "orders.1"}, nil},
		{"counter.*", []string{"counter.a", "counter.b"}, nil},
		{"counter.>", []string{"counter.a", "counter.b", "counter.x.y"}, nil},
		{"*.1", []string{"orders.1"}, nil},
		{"orders.1", []string{"orders.1"}, nil},
		{"gone.*", []string{}, nil},
		{"nothing.>", []string{}, nil},
		{"a..b", nil, kv.ErrInvalidKey},
		{"a.>.b", nil, kv.ErrInvalidKey},
		{"a*", nil, kv.ErrInvalidKey},
	}
	for _, tc := range tests {
		t.Run(tc.filter, func(t *testing.T) {
			keys, err := f.st.Keys(ctx, tc.filter)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(keys, tc.want) {
				t.Errorf("keys = %#v, want %#v", keys, tc.want)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	f := setup(t, 1)
	ctx := testContext(t)
	tests := []struct {
		bucket string
		err    error
		msg    string
	}{
		{bucket: "test"},
		{bucket: "missing", err: kv.ErrNotFound, msg: `"missing" does not exist`},
		{bucket: "bad name", msg: `"bad name" is not valid`},
	}
	for _, tc := range tests {
		t.Run(tc.bucket, func(t *testing.T) {
			st, err := kv.Open[counter](ctx, f.js, tc.bucket)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				if st.Bucket() != tc.bucket {
					t.Errorf("bucket = %q, want %q", st.Bucket(), tc.bucket)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want one saying %s", err, tc.msg)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want it to match %v", err, tc.err)
			}
		})
	}
}

func TestRestart(t *testing.T) {
	f := setup(t, 5)
	ctx := testContext(t)
	want := counter{N: 42, Name: "durable"}
	rev := put(t, ctx, f.st, "counter.c1", want)

	// A connection that reconnects on its own, to use after the restart.
	reconnected := make(chan struct{}, 1)
	js := connect(t, f.srv.URL, nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case reconnected <- struct{}{}:
			default:
			}
		}))
	old, err := kv.Open[counter](ctx, js, "test")
	if err != nil {
		t.Fatalf("open: %v", err)
	}

	f.srv.Restart(t)

	fresh, err := kv.Open[counter](ctx, connect(t, f.srv.URL), "test")
	if err != nil {
		t.Fatalf("open after restart: %v", err)
	}
	e, err := fresh.Get(ctx, "counter.c1")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if !reflect.DeepEqual(e.Value, want) || e.Revision != rev {
		t.Errorf("after restart get = %+v, want %+v at revision %d", e, want, rev)
	}

	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-reconnected:
	case <-timer.C:
		t.Fatal("the old connection did not reconnect")
	}
	next, err := old.Update(ctx, "counter.c1", counter{N: 43}, rev)
	if err != nil {
		t.Fatalf("update over the reconnected connection: %v", err)
	}
	if e, err := fresh.Get(ctx, "counter.c1"); err != nil || e.Revision != next || e.Value.N != 43 {
		t.Errorf("get = %+v, %v; want N 43 at revision %d", e, err, next)
	}
}
