package kv_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// counter is the state type of the tests.
type counter struct {
	N    int      `json:"n"`
	Name string   `json:"name,omitempty"`
	Tags []string `json:"tags,omitempty"`
}

// waitTimeout bounds every wait of a test.
const waitTimeout = 10 * time.Second

// fixture is an embedded server with one bucket, "test".
type fixture struct {
	srv *bustest.Server
	js  jetstream.JetStream
	raw jetstream.KeyValue // the bucket itself, to write what a Store would not
	st  *kv.Store[counter]
}

// setup starts a server and creates bucket "test" keeping history revisions
// per key.
func setup(t *testing.T, history uint8) fixture {
	t.Helper()
	srv := bustest.NewServer(t)
	js := connect(t, srv.URL)
	raw, err := js.CreateKeyValue(testContext(t), jetstream.KeyValueConfig{Bucket: "test", History: history})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return fixture{srv: srv, js: js, raw: raw, st: kv.New[counter](raw)}
}

// connect connects to url and closes the connection at cleanup.
func connect(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// testContext is canceled when the test ends or after 30 seconds.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// put writes v to key and fails the test on error.
func put(t *testing.T, ctx context.Context, st *kv.Store[counter], key string, v counter) uint64 {
	t.Helper()
	rev, err := st.Put(ctx, key, v)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

// watched is one item a Watch iterator yielded.
type watched struct {
	e   kv.Entry[counter]
	err error
}

// watch runs a Watch loop in a goroutine and hands its items over a channel,
// which is closed when the loop ends. Cancel ctx to end it.
func watch(ctx context.Context, st *kv.Store[counter], pattern string) <-chan watched {
	ch := make(chan watched)
	go func() {
		defer close(ch)
		for e, err := range st.Watch(ctx, pattern) {
			select {
			case ch <- watched{e, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// next returns the next item of ch, failing the test if none comes in time.
func next(t *testing.T, ch <-chan watched) watched {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case w, ok := <-ch:
		if !ok {
			t.Fatal("watch ended early")
		}
		return w
	case <-timer.C:
		t.Fatal("no watch event in time")
	}
	panic("unreachable")
}

// ended waits for the watch loop behind ch to end, failing the test if it
// yields an error or does not end in time.
func ended(t *testing.T, ch <-chan watched) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case w, ok := <-ch:
			if !ok {
				return
			}
			if w.err != nil {
				t.Fatalf("watch yielded %v while ending", w.err)
			}
		case <-timer.C:
			t.Fatal("watch did not end in time")
		}
	}
}

// eventually polls cond until it holds, failing the test after waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// subscriptionGoroutines counts the client goroutines delivering messages to
// subscription callbacks: one per live asynchronous subscription, watchers
// included.
func subscriptionGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("(*Conn).waitForMsgs"))
		}
		buf = make([]byte, 2*len(buf))
	}
}
