package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// goWorker is a worker written against the raw nats.go API and the contract
// of docs/polyglot.md alone (it decodes requests generically, not with the
// package's types): it checks the contract from the outside.
type goWorker struct {
	nc       *nats.Conn
	requests atomic.Int64
}

// handler answers one decoded request: a value to encode in the request's
// encoding, raw bytes to send as they are ([]byte), or nil for no answer.
type handler func(req map[string]any, n int64) any

// startGoWorker subscribes a worker of kind on its own connection to url,
// in the kind's queue group. It stops at cleanup.
func startGoWorker(t testing.TB, url string, names bus.Names, kind string, h handler) *goWorker {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("go-worker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &goWorker{nc: nc}
	_, err = nc.QueueSubscribe(names.Logic(kind), names.LogicQueue(kind), func(m *nats.Msg) {
		if m.Header.Get("EA-Probe") != "" {
			// A probe asks whether a worker is there: answer at once.
			if err := m.Respond(nil); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				t.Errorf("worker: respond to a probe: %v", err)
			}
			return
		}
		n := w.requests.Add(1)
		ct := m.Header.Get("Content-Type")
		var req map[string]any
		var derr error
		if ct == "application/msgpack" {
			derr = msgpack.Unmarshal(m.Data, &req)
		} else {
			derr = json.Unmarshal(m.Data, &req)
		}
		if derr != nil {
			t.Errorf("worker: request does not decode as %s: %v", ct, derr)
			return
		}
		out := h(req, n)
		if out == nil {
			return
		}
		body, ok := out.([]byte)
		if !ok {
			if ct == "application/msgpack" {
				body, err = msgpack.Marshal(out)
			} else {
				body, err = json.Marshal(out)
			}
			if err != nil {
				t.Errorf("worker: encode reply: %v", err)
				return
			}
		}
		if err := m.Respond(body); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("worker: respond: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// toInt reads a number of a decoded request (JSON float64 or any msgpack
// integer).
func toInt(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	case uint64:
		return int64(n)
	}
	return 0
}

// counter is the Go demo counter (examples/kinds) as a worker: "inc" adds
// payload "by" (default 1) to "count", emits "count" and replies "count"
// when the record has a reply subject; any other type is a permanent error.
func counter(req map[string]any, _ int64) any {
	rec, _ := req["record"].(map[string]any)
	state, _ := req["state"].(map[string]any)
	if rec["type"] != "inc" {
		return map[string]any{"error": map[string]any{"message": fmt.Sprintf("unknown record type %v", rec["type"]), "permanent": true}}
	}
	by := int64(1)
	if p, ok := rec["payload"].(map[string]any); ok && p["by"] != nil {
		by = toInt(p["by"])
	}
	count := toInt(state["count"]) + by
	outs := []any{map[string]any{"op": "emit", "type": "count", "payload": map[string]any{"count": count}}}
	if r, _ := rec["reply"].(string); r != "" {
		outs = append(outs, map[string]any{"op": "reply", "type": "count", "payload": map[string]any{"count": count}})
	}
	return map[string]any{"state": map[string]any{"count": count}, "records": outs}
}

// host starts a node hosting remote kind name with opts on conn.
func host(t testing.TB, conn *bus.Conn, name string, opts remote.Options) *actortest.Node {
	t.Helper()
	k, err := remote.New(conn, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return actortest.StartNode(t, conn, actor.Options{}, k)
}

func newClient(t testing.TB, conn *bus.Conn) *actor.Client {
	t.Helper()
	c, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// send sends a record of type typ with a JSON payload (nil for none).
func send(t testing.TB, c *actor.Client, ref records.Ref, typ string, payload any, reply string) records.Record {
	t.Helper()
	rec, err := records.NewJSON(typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	rec.Reply = reply
	rec, err = c.Send(ctxT(t), ref, rec)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// countOf reads the "count" of ref's state.
func countOf(t testing.TB, c *actor.Client, ref records.Ref) int64 {
	t.Helper()
	doc, err := c.State(ctxT(t), ref)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Count int64 `json:"count"`
	}
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Count
}

// waitCount waits until ref's count is want, failing if it goes above: a
// record applied twice.
func waitCount(t testing.TB, c *actor.Client, ref records.Ref, want int64, timeout time.Duration) {
	t.Helper()
	var got int64
	actortest.Eventually(t, timeout, fmt.Sprintf("count of %s to reach %d", ref, want), func() bool {
		got = countOf(t, c, ref)
		if got > want {
			t.Fatalf("count of %s is %d, above %d: a record was applied twice", ref, got, want)
		}
		return got == want
	})
}

// stored returns the records stored on subject of stream (an outbox or
// the dead letters), failing on a duplicate id.
func stored(t testing.TB, conn *bus.Conn, stream, subject string) []records.Record {
	t.Helper()
	ctx := ctxT(t)
	s, err := conn.JetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	total := int(info.State.Subjects[subject])
	if total == 0 {
		return nil
	}
	cons, err := conn.JetStream().OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []records.Record
	seen := map[string]bool{}
	for len(out) < total {
		batch, err := cons.Fetch(min(total-len(out), 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			rec, err := records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			if seen[rec.ID] {
				t.Fatalf("record %s stored twice on %s", rec.ID, subject)
			}
			seen[rec.ID] = true
			if e := msg.Headers().Get(records.HeaderError); e != "" {
				rec.Payload = []byte(e) // dead letters: the reason instead
			}
			out = append(out, rec)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
	}
	return out
}

// counts decodes the "count" of each record (msgpack or JSON).
func counts(t testing.TB, recs []records.Record) []int64 {
	t.Helper()
	var out []int64
	for _, r := range recs {
		var c struct {
			Count int64 `json:"count"`
		}
		if err := r.Decode(&c); err != nil {
			t.Fatalf("record %s (%s): %v", r.ID, r.Type, err)
		}
		out = append(out, c.Count)
	}
	return out
}

// running returns 1, 1+2, ... : the counts n increments of 1 emit.
func running(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}
