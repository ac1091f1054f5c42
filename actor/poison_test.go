package actor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

type strictState struct {
	N int `json:"n"`
}

// strictKind accepts msgpack only, at most 1 KiB, and has record types that
// panic, always fail, or fail twice before succeeding.
func strictKind() actor.Kind[strictState] {
	var mu sync.Mutex
	flaky := map[string]int{}
	return actor.Kind[strictState]{
		Name:       "strict",
		Accept:     []string{records.ContentMsgpack},
		MaxPayload: 1024,
		Retry:      actor.RetryPolicy{Attempts: 3, Backoff: 5 * time.Millisecond},
		Logic: func(ctx *actor.Context, s strictState) (strictState, error) {
			switch typ := ctx.Record().Type; typ {
			case "inc":
				var p struct {
					By int `json:"by"`
				}
				if err := ctx.Decode(&p); err != nil {
					return s, err
				}
				s.N++
			case "boom":
				panic("boom")
			case "fail":
				return s, errors.New("always fails")
			case "flaky":
				mu.Lock()
				flaky[ctx.Record().ID]++
				n := flaky[ctx.Record().ID]
				mu.Unlock()
				if n < 3 {
					return s, errors.New("not yet")
				}
				s.N++
			default:
				return s, actor.UnknownType(typ)
			}
			return s, nil
		},
	}
}

// rawPublish publishes a message with the given headers and body to the
// mailbox of r through JetStream, as any client could.
func rawPublish(t testing.TB, conn *bus.Conn, r records.Ref, headers map[string]string, body []byte) {
	t.Helper()
	msg := nats.NewMsg(conn.Names().Mailbox(r))
	for k, v := range headers {
		msg.Header.Set(k, v)
	}
	msg.Data = body
	if _, err := conn.JetStream().PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

func TestPoisonRecords(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	node := startNode(t, conn, nil, strictKind())
	c := newClient(t, conn)
	ctx := ctxT(t)
	s1 := ref("strict", "s1")
	if _, err := c.Create(ctx, s1, nil); err != nil {
		t.Fatal(err)
	}
	mp := map[string]string{"Content-Type": records.ContentMsgpack}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	big := append([]byte{0xc5, 0x07, 0xd0}, make([]byte, 2000)...) // msgpack bin16 of 2000 bytes
	cases := []struct {
		name    string
		headers map[string]string
		body    []byte
		reason  string
	}{
		{"malformed msgpack", with(mp, "EA-Type", "inc"), []byte{0xc1}, "decode"},
		{"json to a msgpack kind", map[string]string{"EA-Type": "inc", "Content-Type": records.ContentJSON}, []byte(`{"by":1}`), "content_type"},
		{"oversize payload", with(mp, "EA-Type", "inc"), big, "oversize"},
		{"unknown record type", with(mp, "EA-Type", "zap"), nil, "rejected"},
		{"logic panics", with(mp, "EA-Type", "boom"), nil, "panic"},
		{"logic always fails", with(mp, "EA-Type", "fail"), nil, "failed"},
		{"payload that does not fit", with(mp, "EA-Type", "inc"), []byte{0xa1, 'x'}, "decode"},
		{"bad envelope", with(mp, "EA-Type", "inc", "EA-Time", "yesterday"), nil, "decode"},
	}
	dead, err := c.DeadLetters(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rawPublish(t, conn, s1, tc.headers, tc.body)
			dl, err := next()
			if err != nil {
				t.Fatal(err)
			}
			if dl.Reason != tc.reason || dl.Error == "" || dl.Seq == 0 {
				t.Fatalf("dead letter reason %q error %q seq %d, want reason %q", dl.Reason, dl.Error, dl.Seq, tc.reason)
			}
			t.Logf("EA-Error: %s", dl.Error)
			actortest.Eventually(t, 10*time.Second, "status ERROR", func() bool {
				doc, err := c.State(ctx, s1)
				return err == nil && doc.Seq == dl.Seq && doc.Status == actor.StatusError && doc.Error == dl.Error
			})
			// The next good record is processed and clears the error.
			before := count2(t, c, s1)
			rawPublish(t, conn, s1, with(mp, "EA-Type", "flaky"), nil)
			actortest.Eventually(t, 10*time.Second, "next record processed", func() bool {
				doc, err := c.State(ctx, s1)
				return err == nil && doc.Status == actor.StatusIdle && doc.Error == "" && count2(t, c, s1) == before+1
			})
		})
	}
	if got := metricSum(t, node.Registry, "ea_dead_letters_total", "kind", "strict", "reason", "decode"); got != 3 {
		t.Errorf("ea_dead_letters_total{reason=decode} = %v, want 3", got)
	}
	if got := metricSum(t, node.Registry, "ea_logic_retries_total", "kind", "strict"); got != float64(2*len(cases)+2) {
		t.Errorf("ea_logic_retries_total = %v, want %d (2 per flaky record, 2 for fail)", got, 2*len(cases)+2)
	}
	if got := metricSum(t, node.Registry, "ea_records_processed_total", "kind", "strict", "outcome", "dead"); got != float64(len(cases)) {
		t.Errorf("dead outcomes = %v, want %d", got, len(cases))
	}
}

func count2(t testing.TB, c *actor.Client, r records.Ref) int {
	t.Helper()
	doc, err := c.State(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var s strictState
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.N
}

// iterPull turns a push iterator into next/stop, with a timeout per item.
func iterPull[T any](seq func(func(T, error) bool)) (next func() (T, error), stop func()) {
	type item struct {
		v   T
		err error
	}
	ch := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		seq(func(v T, err error) bool {
			select {
			case ch <- item{v, err}:
				return true
			case <-done:
				return false
			}
		})
	}()
	var once sync.Once
	return func() (T, error) {
			select {
			case it, ok := <-ch:
				if !ok {
					var zero T
					return zero, errors.New("iterator ended")
				}
				return it.v, it.err
			case <-time.After(20 * time.Second):
				var zero T
				return zero, errors.New("nothing within 20s")
			}
		}, func() {
			once.Do(func() { close(done) })
		}
}

// TestDeadLetterThatCannotBeWritten: a record bound for dead letters that
// the dead-letter stream refuses (its MaxMsgSize is below the smallest dead
// letter) holds its effector: the partition is read again and the record
// comes back, and the records behind it are not applied before it. It is
// never skipped as if applied: once the stream takes it, it goes to dead
// letters and the rest is applied.
func TestDeadLetterThatCannotBeWritten(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	n := startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	r := ref("counter", "held")
	if _, err := c.Create(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	js := conn.JetStream()
	stream, err := js.Stream(ctx, conn.Names().DeadStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	limit := cfg.MaxMsgSize
	cfg.MaxMsgSize = 64
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	boom, err := records.New("boom", nil) // the counter knows no "boom": a dead letter
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, r, boom); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, 3)
	// Loaded three times: the refused record came back twice, each time
	// after the partition was read again.
	overtaken := func() {
		if got := count(t, c, r); got != 0 {
			t.Fatalf("count %d while the record before them could not be dead-lettered: records overtook it", got)
		}
	}
	actortest.Eventually(t, 30*time.Second, "the refused record read again", func() bool {
		overtaken()
		return metricSum(t, n.Registry, "ea_activations_total") >= 3
	})
	overtaken()
	cfg.MaxMsgSize = limit
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitCount(t, conn, c, r, 3, 30*time.Second)
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != 1 {
		t.Fatalf("%d dead letters, want 1 (the refused record, once)", got)
	}
}
