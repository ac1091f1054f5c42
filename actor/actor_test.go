package actor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	ctx := ctxT(t)
	c1 := ref("counter", "c1")

	doc, err := c.Create(ctx, c1, kinds.CounterState{Count: 40})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != actor.StatusIdle || doc.ID != "c1" || doc.Kind != "counter" {
		t.Fatalf("created document = %+v", doc)
	}
	sub, err := c.Subscribe(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New("inc", kinds.Inc{By: ptr(int64(2))})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := c.Send(ctx, c1, rec)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Seq == 0 || sent.Subject != "ea.mbox.counter.c1" {
		t.Fatalf("sent record = %+v, want a stream sequence and the mailbox subject", sent)
	}
	for out, err := range sub {
		if err != nil {
			t.Fatal(err)
		}
		var got kinds.Count
		if err := out.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if out.Type != "count" || got.Count != 42 || out.From != c1 || out.Cause != sent.ID || !strings.HasPrefix(out.ID, sent.ID+":0.") || !signedTag.MatchString(strings.TrimPrefix(out.ID, sent.ID+":0.")) {
			t.Fatalf("emitted %+v with payload %+v", out, got)
		}
		break
	}
	waitCountSaid(t, conn, c, c1, 42, []int64{42}, 10*time.Second)
	doc, err = c.State(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Seq != sent.Seq || doc.Status != actor.StatusIdle || doc.Updated.IsZero() {
		t.Fatalf("state document = %+v, want seq %d and IDLE", doc, sent.Seq)
	}

	if _, err := c.Create(ctx, c1, nil); !errors.Is(err, actor.ErrExists) {
		t.Fatalf("second create: err = %v, want ErrExists", err)
	}
	doc, err = c.Terminate(ctx, c1)
	if err != nil || doc.Status != actor.StatusTerminated {
		t.Fatalf("terminate: %+v, %v", doc, err)
	}
	if _, err := c.Terminate(ctx, c1); err != nil {
		t.Fatalf("terminating twice: %v", err)
	}
	if _, err := c.Send(ctx, c1, rec); !errors.Is(err, actor.ErrTerminated) {
		t.Fatalf("send to terminated: err = %v, want ErrTerminated", err)
	}
	if doc, err := c.State(ctx, c1); err != nil || doc.Status != actor.StatusTerminated {
		t.Fatalf("state after terminate: %+v, %v", doc, err)
	}
	if _, err := c.Create(ctx, c1, nil); !errors.Is(err, actor.ErrExists) {
		t.Fatalf("create over terminated: err = %v, want ErrExists", err)
	}
}

func TestControlErrors(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	ctx := ctxT(t)
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"kind no node hosts", func() error { _, err := c.Create(ctx, ref("nobody", "x"), nil); return err }, actor.ErrNoHost},
		{"terminate unknown", func() error { _, err := c.Terminate(ctx, ref("counter", "ghost")); return err }, actor.ErrNotFound},
		{"state unknown", func() error { _, err := c.State(ctx, ref("counter", "ghost")); return err }, actor.ErrNotFound},
		{"send unknown", func() error {
			rec, _ := records.New("inc", nil)
			_, err := c.Send(ctx, ref("counter", "ghost"), rec)
			return err
		}, actor.ErrNotFound},
		{"bad id", func() error { _, err := c.Create(ctx, ref("counter", "a.b"), nil); return err }, actor.ErrInvalid},
		{"state that does not fit", func() error {
			_, err := c.Create(ctx, ref("counter", "c2"), map[string]any{"count": "many"})
			return err
		}, actor.ErrInvalid},
		{"state with unknown field", func() error {
			_, err := c.Create(ctx, ref("counter", "c3"), map[string]any{"cont": 1})
			return err
		}, actor.ErrInvalid},
		{"bad record", func() error {
			_, err := c.Send(ctx, ref("counter", "c1"), records.Record{Type: "in c"})
			return err
		}, actor.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			t.Logf("error reads: %v", err)
		})
	}
}

func TestNoNodeRunning(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	_, err := c.Create(ctxT(t), ref("counter", "c1"), nil)
	if !errors.Is(err, actor.ErrNoHost) {
		t.Fatalf("err = %v, want ErrNoHost", err)
	}
}

func TestTenThousandIncrements(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	c1 := ref("counter", "c1")
	if _, err := c.Create(ctxT(t), c1, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, c1, 10_000)
	waitCount(t, conn, c, c1, 10_000, 3*time.Minute)
}

// 100 counters fed at once, 200 records each (20,000 in all): more than an
// effector's Overflow (128) each, so own consumers and batching are both
// exercised while the partitions interleave; every count exact. Not
// parallel: the burst takes both cores. The default 64 partitions a kind:
// with 8, the 20,000 records go through a few partition consumers and the
// test takes half as long again under -race.
func TestHundredCountersInParallel(t *testing.T) {
	_, conn := serverWith(t, bus.Config{Partitions: bus.DefaultPartitions})
	n := startNode(t, conn, nil)
	c := newClient(t, conn)
	ctx := ctxT(t)
	const counters, each = 100, 200
	for i := range counters {
		if _, err := c.Create(ctx, ref("counter", fmt.Sprint("c", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < counters; i += 4 {
				if err := tryPublishIncs(conn, ref("counter", fmt.Sprint("c", i)), each); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	refs := make([]records.Ref, counters)
	for i := range refs {
		refs[i] = ref("counter", fmt.Sprint("c", i))
	}
	waitCounts(t, conn, c, refs, each, 3*time.Minute)
	t.Logf("%v effectors read their own mailbox for a while", metricSum(t, n.Registry, "ea_overflows_total"))
}

func TestControllerDrivesCounter(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	ctx := ctxT(t)
	ctl, c1 := ref("controller", "ctl"), ref("counter", "c1")
	for _, r := range []records.Ref{ctl, c1} {
		if _, err := c.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		rec, err := records.New("start", kinds.Start{Counter: "c1", Times: 50})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, ctl, rec); err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, conn, c, c1, 150, time.Minute)
	doc, err := c.State(ctx, ctl)
	if err != nil {
		t.Fatal(err)
	}
	var s kinds.ControllerState
	if err := doc.Decode(&s); err != nil || s.Sent != 150 {
		t.Fatalf("controller state %+v, %v; want sent 150", s, err)
	}
	// Every inc the controller sent names it as sender, in the counter's mailbox.
	if got := len(outputs(t, conn, conn.Names().Mailbox(c1))); got != 150 {
		t.Fatalf("%d records in counter mailbox, want 150", got)
	}
}

// TestPlainNATSClient drives everything with a bare NATS connection: JSON
// bodies and headers only, no library of ours.
func TestPlainNATSClient(t *testing.T) {
	t.Parallel()
	srv, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	reply, err := nc.Request("ea.ctl.create.counter", []byte(`{"id":"p1","state":{"count":5}}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("create failed: %s %s", code, reply.Header.Get("Nats-Service-Error"))
	}
	var doc map[string]any
	if err := json.Unmarshal(reply.Data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["status"] != "IDLE" || doc["state"].(map[string]any)["count"] != float64(5) {
		t.Fatalf("create reply = %s", reply.Data)
	}

	ctlReply, err := nc.Request("ea.ctl.create.controller", []byte(`{"id":"pc"}`), 10*time.Second)
	if err != nil || ctlReply.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("create controller: %v %v", err, ctlReply.Header)
	}

	js := func(subject, typ, body string) {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Header.Set("EA-Type", typ)
		msg.Header.Set("Content-Type", "application/json")
		msg.Data = []byte(body)
		// A plain publish: the stream stores it, no id given.
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	js("ea.mbox.counter.p1", "inc", `{"by":2}`)
	js("ea.mbox.counter.p1", "inc", ``)
	js("ea.mbox.controller.pc", "start", `{"counter":"p1","times":3}`)
	waitCountSaid(t, conn, c, ref("counter", "p1"), 5+2+1+3, []int64{7, 8, 9, 10, 11}, 30*time.Second)

	for _, tt := range []struct {
		subject, body, code string
	}{
		{"ea.ctl.create.counter", `{"id":"p1"}`, "409"},
		{"ea.ctl.create.counter", `{"id":"bad id"}`, "400"},
		{"ea.ctl.create.counter", `not json`, "400"},
		{"ea.ctl.create.nobody", `{"id":"x"}`, "503"},
		{"ea.ctl.terminate.counter", `{"id":"ghost"}`, "404"},
	} {
		reply, err := nc.Request(tt.subject, []byte(tt.body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := reply.Header.Get("Nats-Service-Error-Code"); got != tt.code {
			t.Errorf("%s %s: code %q (%s), want %s", tt.subject, tt.body, got, reply.Header.Get("Nats-Service-Error"), tt.code)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestSubscribeEndsWithContext checks that ranging over a subscription ends
// when its context does, and that records emitted before the context ended
// all arrive in order.
func TestSubscribeEndsWithContext(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	c1 := ref("counter", "c1")
	if _, err := c.Create(ctxT(t), c1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := c.Subscribe(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, c1, 5)
	var got []int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rec, err := range sub {
			if err != nil {
				t.Error(err)
				return
			}
			var n kinds.Count
			if err := rec.Decode(&n); err != nil {
				t.Error(err)
				return
			}
			if got = append(got, n.Count); len(got) == 5 {
				cancel()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("the range did not end after its context was cancelled; got %v", got)
	}
	if !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("emitted counts %v, want 1..5", got)
	}
}
