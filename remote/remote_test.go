package remote_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
	"github.com/effectors/effectors/retry"
)

// TestCounter drives a counter whose logic is a Go worker on the raw NATS
// API, in both encodings: exact state, every output once and in order, the
// reply, and the request the worker saw.
func TestCounter(t *testing.T) {
	for _, enc := range []remote.Encoding{remote.JSON, remote.Msgpack} {
		t.Run(string(enc), func(t *testing.T) {
			srv := bustest.NewServer(t)
			conn := srv.Connect(t)
			names := conn.Names()
			var mu sync.Mutex
			var seen []map[string]any
			startGoWorker(t, srv.URL, names, "counter", func(req map[string]any, n int64) any {
				mu.Lock()
				seen = append(seen, req)
				mu.Unlock()
				return counter(req, n)
			})
			host(t, conn, "counter", remote.Options{Encoding: enc})
			c := newClient(t, conn)
			ref := records.Ref{Kind: "counter", ID: "c1"}
			doc := actortest.Create(t, c, ref, map[string]any{"count": 100})
			if doc.Status != "IDLE" {
				t.Fatalf("created with status %s", doc.Status)
			}

			inbox := nats.NewInbox()
			replies, err := conn.NATS().SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = replies.Unsubscribe() }()
			const n = 20
			var want []int64
			sum := int64(100)
			for i := 1; i <= n; i++ {
				reply := ""
				if i == n {
					reply = inbox
				}
				var payload any
				if i%2 == 0 {
					payload = map[string]any{"by": i}
				}
				if i%2 == 0 {
					sum += int64(i)
				} else {
					sum++
				}
				want = append(want, sum)
				if i%3 == 0 { // msgpack payloads too
					rec, err := records.New("inc", payload)
					if err != nil {
						t.Fatal(err)
					}
					rec.Reply = reply
					if _, err := c.Send(ctxT(t), ref, rec); err != nil {
						t.Fatal(err)
					}
					continue
				}
				send(t, c, ref, "inc", payload, reply)
			}
			waitCount(t, c, ref, sum, time.Minute)

			out := stored(t, conn, names.OutboxStream(), names.Outbox(ref))
			if got := counts(t, out); !slices.Equal(got, want) {
				t.Fatalf("outbox counts %v, want %v", got, want)
			}
			for _, r := range out {
				if r.Type != "count" || r.From != ref || r.ContentType != records.ContentMsgpack {
					t.Fatalf("output %+v: want type count from %s in msgpack", r, ref)
				}
			}
			msg, err := replies.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("no reply on %s: %v", inbox, err)
			}
			rep, err := records.FromMsg(msg.Subject, msg.Header, msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			if got := counts(t, []records.Record{rep}); got[0] != sum {
				t.Fatalf("reply count %d, want %d", got[0], sum)
			}

			// The worker saw each record once, with the state before it.
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != n {
				t.Fatalf("worker saw %d requests, want %d", len(seen), n)
			}
			first := seen[0]
			rec := first["record"].(map[string]any)
			if first["v"] == nil || toInt(first["v"]) != 1 || first["kind"] != "counter" || first["id"] != "c1" {
				t.Fatalf("request head %v: want v 1, kind counter, id c1", first)
			}
			if toInt(first["state"].(map[string]any)["count"]) != 100 || rec["type"] != "inc" || toInt(rec["seq"]) < 1 || rec["id"] == "" {
				t.Fatalf("first request %v: want state count 100, record type inc with a seq and an id", first)
			}
			for _, f := range []string{"id", "type", "from", "process", "owner", "cause", "reply", "priority", "time", "seq", "content_type", "payload"} {
				if _, ok := rec[f]; !ok {
					t.Errorf("request record has no %q: %v", f, rec)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, first["deadline"].(string)); err != nil {
				t.Errorf("deadline: %v", err)
			}
		})
	}
}

// TestReplies checks each way a reply can fail against what it does to the
// record: dead letters at once with the reason (malformed, permanent), or
// retried then applied once (retryable error, no answer).
func TestReplies(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	// Each effector id picks the worker's behaviour.
	behave := map[string]func(req map[string]any, n int64) any{
		"permanent": func(map[string]any, int64) any {
			return map[string]any{"error": map[string]any{"message": "boom: cannot do that", "permanent": true}}
		},
		"not-json":      func(map[string]any, int64) any { return []byte("{not json") },
		"no-state":      func(map[string]any, int64) any { return map[string]any{"records": []any{}} },
		"unknown-field": func(map[string]any, int64) any { return map[string]any{"state": 1, "stat": 2} },
		"trailing":      func(map[string]any, int64) any { return []byte(`{"state":1} {}`) },
		"bad-op": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "fly", "type": "x"}}}
		},
		"bad-to": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "send", "to": "counter/a.b", "type": "x"}}}
		},
		"bad-type": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "emit", "type": "a b"}}}
		},
		"no-reply-subject": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "reply", "type": "x"}}}
		},
		"bad-reply-to": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "send", "to": "counter/x", "type": "x", "reply_to": "a b"}}}
		},
		"bad-priority": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "emit", "type": "x", "priority": "urgent"}}}
		},
		"bad-content-type": func(map[string]any, int64) any {
			return map[string]any{"state": 1, "records": []any{map[string]any{"op": "emit", "type": "x", "content_type": "text/plain"}}}
		},
		"bad-version": func(map[string]any, int64) any { return map[string]any{"v": 2, "state": 1} },
		"too-many": func(map[string]any, int64) any {
			recs := make([]any, 4)
			for i := range recs {
				recs[i] = map[string]any{"op": "emit", "type": "x"}
			}
			return map[string]any{"state": 1, "records": recs}
		},
		"too-large": func(map[string]any, int64) any {
			return map[string]any{"state": strings.Repeat("x", 5000)}
		},
		// Retryable: fails twice, then counts.
		"flaky": func(req map[string]any, n int64) any {
			if n <= 2 {
				return map[string]any{"error": map[string]any{"message": "busy, try again"}}
			}
			return counter(req, n)
		},
		// No answer to the first request (a worker that died holding it).
		"silent": func(req map[string]any, n int64) any {
			if n == 1 {
				return nil
			}
			return counter(req, n)
		},
	}
	var mu sync.Mutex
	calls := map[string]int64{}
	for _, kind := range []string{"r"} {
		startGoWorker(t, srv.URL, names, kind, func(req map[string]any, _ int64) any {
			id, _ := req["id"].(string)
			mu.Lock()
			calls[id]++
			n := calls[id]
			mu.Unlock()
			return behave[id](req, n)
		})
	}
	host(t, conn, "r", remote.Options{
		Timeout: time.Second, MaxRecords: 3, MaxReply: 4096,
		Retry: retry.Policy{Attempts: 4, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Multiplier: 2},
	})
	c := newClient(t, conn)

	dead := map[string]string{ // id: what EA-Error must say
		"permanent":        "worker of kind r failed (permanent): boom: cannot do that",
		"not-json":         "malformed reply from the worker of kind r: JSON",
		"no-state":         `neither "state" nor "error"`,
		"unknown-field":    `unknown field "stat"`,
		"trailing":         "data after the reply object",
		"bad-op":           `op "fly": want "send", "emit" or "reply"`,
		"bad-to":           "record 0 (send \"x\"): to:",
		"bad-type":         "EA-Type",
		"no-reply-subject": "it has no EA-Reply",
		"bad-reply-to":     "EA-Reply",
		"bad-priority":     `priority "urgent"`,
		"bad-content-type": `content_type "text/plain"`,
		"bad-version":      "protocol version 2",
		"too-many":         "4 records to send exceed MaxRecords 3",
		"too-large":        "exceed MaxReply 4096",
	}
	for id := range dead {
		ref := records.Ref{Kind: "r", ID: id}
		actortest.Create(t, c, ref, nil)
		send(t, c, ref, "inc", nil, "")
	}
	for _, id := range []string{"flaky", "silent"} {
		ref := records.Ref{Kind: "r", ID: id}
		actortest.Create(t, c, ref, nil)
		send(t, c, ref, "inc", map[string]any{"by": 7}, "")
	}
	for id, want := range dead {
		ref := records.Ref{Kind: "r", ID: id}
		var got []records.Record
		actortest.Eventually(t, time.Minute, "dead letter of "+id, func() bool {
			got = stored(t, conn, names.DeadStream(), names.Dead(ref))
			return len(got) > 0
		})
		if len(got) != 1 || !strings.Contains(string(got[0].Payload), want) {
			t.Errorf("%s: dead letters %q, want one saying %q", id, got[0].Payload, want)
		}
		doc, err := c.State(ctxT(t), ref)
		if err != nil {
			t.Fatal(err)
		}
		if string(doc.State) != "\x80" { // still the initial empty map
			t.Errorf("%s: state %x changed by a failed record", id, doc.State)
		}
		if out := stored(t, conn, names.OutboxStream(), names.Outbox(ref)); len(out) != 0 {
			t.Errorf("%s: %d records published by a failed record", id, len(out))
		}
		mu.Lock()
		if calls[id] != 1 {
			t.Errorf("%s: worker asked %d times, want once (a permanent failure is not retried)", id, calls[id])
		}
		mu.Unlock()
	}
	for _, id := range []string{"flaky", "silent"} {
		ref := records.Ref{Kind: "r", ID: id}
		waitCount(t, c, ref, 7, time.Minute)
		if out := stored(t, conn, names.OutboxStream(), names.Outbox(ref)); !slices.Equal(counts(t, out), []int64{7}) {
			t.Errorf("%s: outputs %v, want one count 7", id, counts(t, out))
		}
		if dl := stored(t, conn, names.DeadStream(), names.Dead(ref)); len(dl) != 0 {
			t.Errorf("%s: dead letter %q after a retry fixed it", id, dl[0].Payload)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["flaky"] != 3 || calls["silent"] != 2 {
		t.Errorf("worker calls: flaky %d (want 3), silent %d (want 2)", calls["flaky"], calls["silent"])
	}
}

// TestNoWorker: with no worker, the record is retried with the kind's
// policy, then dead-lettered with ErrNoWorker's message; a worker that
// starts later serves the next record.
func TestNoWorker(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	host(t, conn, "counter", remote.Options{Retry: retry.Policy{Attempts: 3, Backoff: 10 * time.Millisecond, Multiplier: 1}})
	c := newClient(t, conn)
	ref := records.Ref{Kind: "counter", ID: "c1"}
	actortest.Create(t, c, ref, nil)
	send(t, c, ref, "inc", nil, "")
	var dl []records.Record
	actortest.Eventually(t, time.Minute, "dead letter", func() bool {
		dl = stored(t, conn, names.DeadStream(), names.Dead(ref))
		return len(dl) > 0
	})
	if want := "failed 3 attempts: " + remote.ErrNoWorker.Error(); !strings.Contains(string(dl[0].Payload), want) {
		t.Fatalf("dead letter says %q, want %q", dl[0].Payload, want)
	}
	startGoWorker(t, srv.URL, names, "counter", counter)
	send(t, c, ref, "inc", map[string]any{"by": 5}, "")
	waitCount(t, c, ref, 5, time.Minute)
}

// TestWorkerDies: two workers share the load; one takes requests and dies
// (its connection closes) without answering the last one. Every record is
// applied exactly once.
func TestWorkerDies(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	startGoWorker(t, srv.URL, names, "counter", counter)
	var doomed *goWorker
	var once sync.Once
	doomed = startGoWorker(t, srv.URL, names, "counter", func(req map[string]any, n int64) any {
		if n < 5 {
			return counter(req, n)
		}
		once.Do(func() { go doomed.nc.Close() }) // dies holding this record
		return nil
	})
	host(t, conn, "counter", remote.Options{Timeout: time.Second})
	c := newClient(t, conn)
	const ids, per = 4, 25
	for i := range ids {
		actortest.Create(t, c, records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}, nil)
	}
	for range per {
		for i := range ids {
			send(t, c, records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}, "inc", nil, "")
		}
	}
	for i := range ids {
		ref := records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
		waitCount(t, c, ref, per, 2*time.Minute)
		if got := counts(t, stored(t, conn, names.OutboxStream(), names.Outbox(ref))); !slices.Equal(got, running(per)) {
			t.Fatalf("%s outputs %v, want %v", ref, got, running(per))
		}
	}
	if doomed.requests.Load() < 5 {
		t.Fatalf("the doomed worker got %d requests: it never held one when it died", doomed.requests.Load())
	}
	if !doomed.nc.IsClosed() {
		t.Fatal("the doomed worker is still connected")
	}
}

// TestNew checks the options New refuses.
func TestNew(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	for name, tc := range map[string]struct {
		kind string
		opts remote.Options
	}{
		"bad kind":    {"a.b", remote.Options{}},
		"encoding":    {"k", remote.Options{Encoding: "text/plain"}},
		"timeout":     {"k", remote.Options{Timeout: -1}},
		"initial":     {"k", remote.Options{Initial: make(chan int)}},
		"max records": {"k", remote.Options{MaxRecords: -1}},
		"max reply":   {"k", remote.Options{MaxReply: -5}},
	} {
		if _, err := remote.New(conn, tc.kind, tc.opts); !errors.Is(err, remote.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := remote.New(nil, "k", remote.Options{}); !errors.Is(err, remote.ErrInvalid) {
		t.Errorf("nil conn: New = %v, want ErrInvalid", err)
	}
	k, err := remote.New(conn, "k", remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Retry.Attempts != remote.DefaultRetry().Attempts || string(k.Initial) != "\x80" {
		t.Fatalf("defaults: retry %+v, initial %x", k.Retry, []byte(k.Initial))
	}
}

// TestReplyState: a present null state is a state (nil); an absent one is
// malformed, in both encodings, and msgpack replies are decoded as strictly
// as JSON ones.
func TestReplyState(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	mp := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	behave := map[string]any{
		"null":          map[string]any{"state": nil},
		"list":          map[string]any{"state": []any{1, "two", 3.5}},
		"absent":        map[string]any{"records": nil},
		"mp-garbage":    []byte{0xc1},
		"mp-trailing":   append(mp(map[string]any{"state": 1}), 0x01),
		"mp-unknown":    mp(map[string]any{"state": 1, "stat": 2}),
		"mp-deep":       append(append([]byte{0x81, 0xa5, 's', 't', 'a', 't', 'e'}, bytes.Repeat([]byte{0x91}, 100_000)...), 0xc0),
		"huge-number":   []byte(`{"state": {"n": 1e400}}`),
		"mp-json-reply": []byte(`{"state": {"count": 9}}`), // Content-Type says JSON
	}
	for _, enc := range []remote.Encoding{remote.JSON, remote.Msgpack} {
		kind := map[remote.Encoding]string{remote.JSON: "j", remote.Msgpack: "m"}[enc]
		nc, err := nats.Connect(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if _, err := nc.Subscribe(names.Logic(kind), func(m *nats.Msg) {
			var req map[string]any
			if err := msgpack.Unmarshal(m.Data, &req); enc == remote.Msgpack && err != nil {
				t.Errorf("msgpack request: %v", err)
			}
			if enc == remote.JSON {
				if err := json.Unmarshal(m.Data, &req); err != nil {
					t.Errorf("JSON request: %v", err)
				}
			}
			out := behave[req["id"].(string)]
			reply := nats.NewMsg(m.Reply)
			switch out := out.(type) {
			case []byte:
				reply.Data = out
				if req["id"] == "mp-json-reply" {
					reply.Header.Set("Content-Type", "application/json")
				}
			default:
				if enc == remote.Msgpack {
					reply.Data = mp(out)
				} else if reply.Data, err = json.Marshal(out); err != nil {
					t.Error(err)
				}
			}
			if err := m.RespondMsg(reply); err != nil {
				t.Error(err)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		k, err := remote.New(conn, kind, remote.Options{Encoding: enc})
		if err != nil {
			t.Fatal(err)
		}
		actortest.StartNode(t, conn, actor.Options{}, k)
	}
	c := newClient(t, conn)
	for _, tc := range []struct {
		kind, id string
		state    []byte // the stored msgpack (empty for nil); nil: dead letter with reason
		reason   string
	}{
		{"j", "null", []byte{}, ""}, // the document stores a nil state as none
		{"m", "null", []byte{}, ""},
		{"j", "list", mp([]any{1, "two", 3.5}), ""},
		{"m", "list", mp([]any{1, "two", 3.5}), ""},
		{"j", "absent", nil, `neither "state" nor "error"`},
		{"m", "absent", nil, `neither "state" nor "error"`},
		{"m", "mp-garbage", nil, "msgpack:"},
		{"m", "mp-trailing", nil, "1 bytes after the value"},
		{"m", "mp-deep", nil, "nested deeper than 1000 levels"},
		{"j", "huge-number", nil, "number 1e400"},
		{"m", "mp-unknown", nil, "unknown field"},
		{"m", "mp-json-reply", mp(map[string]any{"count": 9}), ""},
	} {
		ref := records.Ref{Kind: tc.kind, ID: tc.id}
		actortest.Create(t, c, ref, nil)
		send(t, c, ref, "x", nil, "")
		if tc.state != nil {
			actortest.Eventually(t, time.Minute, "state of "+ref.String(), func() bool {
				doc, err := c.State(ctxT(t), ref)
				if err != nil {
					t.Fatal(err)
				}
				return doc.Seq > 0 && string(doc.State) == string(tc.state)
			})
			continue
		}
		var dl []records.Record
		actortest.Eventually(t, time.Minute, "dead letter of "+ref.String(), func() bool {
			dl = stored(t, conn, names.DeadStream(), names.Dead(ref))
			return len(dl) > 0
		})
		if !strings.Contains(string(dl[0].Payload), tc.reason) {
			t.Errorf("%s: dead letter %q, want it to say %q", ref, dl[0].Payload, tc.reason)
		}
	}
}

// TestErrors checks what the kind's logic returns for each kind of answer,
// in the runtime's vocabulary (errors.Is / errors.As, retry.IsPermanent),
// through actor.Kind.Apply: the logic alone, with a real worker.
func TestErrors(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startGoWorker(t, srv.URL, conn.Names(), "e", func(req map[string]any, _ int64) any {
		switch req["record"].(map[string]any)["type"] {
		case "permanent":
			return map[string]any{"error": map[string]any{"message": "no", "permanent": true}}
		case "retryable":
			return map[string]any{"error": map[string]any{"message": strings.Repeat("é", 600)}}
		case "garbage":
			return []byte("]")
		case "silent":
			return nil
		}
		return map[string]any{"state": map[string]any{"ok": true}, "records": []any{
			map[string]any{"op": "send", "to": "log/main", "type": "seen", "payload": "x", "content_type": "application/json", "priority": "high", "process": "p1"},
		}}
	})
	reg := prometheus.NewRegistry()
	k, err := remote.New(conn, "e", remote.Options{Timeout: 500 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(typ string) (remote.State, []actor.Output, error) {
		rec, err := records.New(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		return k.Apply(ctxT(t), records.Ref{Kind: "e", ID: "x"}, rec, k.Initial)
	}
	state, outs, err := apply("ok")
	if err != nil || string(state) != "\x81\xa2ok\xc3" || len(outs) != 1 {
		t.Fatalf("ok: state %x, %d outputs, %v", []byte(state), len(outs), err)
	}
	if o := outs[0]; o.Subject != "ea.mbox.log.main" || o.Record.Type != "seen" || string(o.Record.Payload) != `"x"` ||
		o.Record.ContentType != records.ContentJSON || o.Record.Priority != records.PriorityHigh || o.Record.Process != "p1" || o.Record.From.String() != "e/x" {
		t.Fatalf("output %s %+v", o.Subject, o.Record)
	}
	var we *remote.WorkerError
	_, _, err = apply("permanent")
	if !errors.As(err, &we) || !we.Permanent || we.Message != "no" || !retry.IsPermanent(err) || !errors.Is(err, remote.ErrWorker) {
		t.Errorf("permanent: %v", err)
	}
	_, _, err = apply("retryable")
	if !errors.As(err, &we) || we.Permanent || retry.IsPermanent(err) || len(we.Message) > 1024+len("…") || !strings.HasSuffix(we.Message, "é…") {
		t.Errorf("retryable: %v", err)
	}
	if _, _, err = apply("garbage"); !errors.Is(err, remote.ErrMalformed) || !retry.IsPermanent(err) {
		t.Errorf("garbage: %v", err)
	}
	if _, _, err = apply("silent"); !errors.Is(err, remote.ErrTimeout) || retry.IsPermanent(err) {
		t.Errorf("silent: %v", err)
	}
	k2, err := remote.New(conn, "nobody", remote.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := records.New("x", nil)
	if _, _, err := k2.Apply(ctxT(t), records.Ref{Kind: "nobody", ID: "x"}, rec, k2.Initial); !errors.Is(err, remote.ErrNoWorker) || retry.IsPermanent(err) {
		t.Errorf("no worker: %v", err)
	}
	for _, tc := range []struct {
		kind, outcome string
		want          float64
	}{
		{"e", "ok", 1}, {"e", "permanent", 1}, {"e", "worker_error", 1}, {"e", "malformed", 1}, {"e", "timeout", 1},
		{"e", "no_worker", 0}, {"e", "error", 0}, {"nobody", "no_worker", 1}, {"nobody", "ok", 0},
	} {
		if got := sample(t, reg, "ea_remote_requests_total", tc.kind, tc.outcome); got != tc.want {
			t.Errorf("ea_remote_requests_total{kind=%q,outcome=%q} = %v, want %v", tc.kind, tc.outcome, got, tc.want)
		}
	}
	if got := sample(t, reg, "ea_remote_request_seconds", "e", ""); got != 4 {
		t.Errorf("ea_remote_request_seconds{kind=e} count = %v, want 4 (the answered requests)", got)
	}
}

// sample returns the value of counter name{kind, outcome} in reg, or the
// sample count of histogram name{kind} when outcome is empty.
func sample(t testing.TB, reg *prometheus.Registry, name, kind, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if (l.GetName() == "kind" && l.GetValue() != kind) || (l.GetName() == "outcome" && l.GetValue() != outcome) {
					continue metric
				}
			}
			if outcome == "" {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
