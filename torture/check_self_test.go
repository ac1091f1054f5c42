//go:build unix

package torture

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// recorder is a testing.TB that keeps the errors reported to it (Fatalf
// still fails the real test: it means the harness broke).
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheckerCatches writes a record log by hand — what a correct runtime
// writes for two counters, then with one fault of the runtime's made in it —
// and checks that checkLog passes the correct log and names each fault.
func TestCheckerCatches(t *testing.T) {
	cases := []struct {
		name string
		mut  func(*fakeLog)
		want string // in one of the errors; "" for none
	}{
		{"correct log", func(*fakeLog) {}, ""},
		{"input never stored", func(l *fakeLog) { l.unstored = true }, "not in the mailbox stream"},
		{"input never applied", func(l *fakeLog) { l.skipOutput = "t-a-2" }, "t-a-2 (mailbox seq 5) has no output: never applied"},
		{"input applied twice", func(l *fakeLog) { l.twice = "t-b-3" }, "applied twice"},
		{"outputs out of order", func(l *fakeLog) { l.swap = true }, "applied out of order"},
		{"output from other state", func(l *fakeLog) { l.offBy = "t-a-4" }, "says count 10, want 9"},
		{"good input dead-lettered", func(l *fakeLog) { l.deadGood = "t-a-0" }, "good input t-a-0 (mailbox seq 1) dead-lettered"},
		{"bad input not dead-lettered", func(l *fakeLog) { l.skipDead = true }, "has no dead letter"},
		{"bad input applied", func(l *fakeLog) { l.applyBad = true }, "caused by bad input"},
		{"final count wrong", func(l *fakeLog) { l.stateOff = true }, "counter/b: count"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv := bustest.NewServer(t)
			conn := srv.Connect(t)
			l := &fakeLog{}
			tc.mut(l)
			pub := l.write(t, ctx, conn.JetStream())
			r := &recorder{TB: t}
			checkLog(r, ctx, conn.JetStream(), pub, oneStream)
			switch {
			case tc.want == "" && len(r.errs) > 0:
				t.Fatalf("errors for a correct log:\n%s", strings.Join(r.errs, "\n"))
			case tc.want != "" && !strings.Contains(strings.Join(r.errs, "\n"), tc.want):
				t.Fatalf("want an error containing %q, got:\n%s", tc.want, strings.Join(r.errs, "\n"))
			}
		})
	}
}

// fakeLog writes the log of counters a and b, each sent inputs 0..5 (input
// 5 of b bad: an unknown type), as a correct runtime would, except for the
// fault its fields ask for.
type fakeLog struct {
	unstored   bool   // the publisher counts an input that is not in the stream
	skipOutput string // no output for this input
	twice      string // two outputs (two tags) for this input
	swap       bool   // counter a's outputs for inputs 1 and 2 swapped
	offBy      string // this input's output counts one more
	deadGood   string // a dead letter for this good input too
	skipDead   bool   // no dead letter for the bad input
	applyBad   bool   // an output for the bad input
	stateOff   bool   // counter b's final count one more
}

func (l *fakeLog) write(t *testing.T, ctx context.Context, js jetstream.JetStream) *publisher {
	t.Helper()
	pub := newPublisher(js, []string{"a", "b"}, 0, 0)
	pubMsg := func(m *nats.Msg) uint64 {
		t.Helper()
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("publish %s: %v", m.Subject, err)
		}
		return ack.Sequence
	}
	type applied struct {
		counter, id string
		seq         uint64
		count       int64
		bad         bool
	}
	var log []applied
	counts := map[string]int64{}
	last := map[string]uint64{}
	for n := range 6 {
		for _, c := range pub.counters {
			bad := c == "b" && n == 5
			m := pub.msg(c, n, false)
			in := &pub.inputs[c][len(pub.inputs[c])-1]
			if bad {
				m.Header.Set("EA-Type", "dec")
				in.bad, in.by = "type dec", 0
			}
			seq := pubMsg(m)
			pub.acked(m, &jetstream.PubAck{Sequence: seq})
			counts[c] += in.by
			log = append(log, applied{counter: c, id: in.id, seq: seq, count: counts[c], bad: bad})
			last[c] = seq
		}
	}
	if l.unstored {
		pub.inputs["a"] = append(pub.inputs["a"], input{id: "t-a-99", by: 1})
	}
	if l.swap {
		i, j := 2, 4 // a's inputs 1 and 2 (a and b alternate)
		log[i], log[j] = log[j], log[i]
	}
	output := func(a applied, tag string, count int64) {
		t.Helper()
		m := nats.NewMsg("ea.out.counter." + a.counter)
		m.Header.Set("Nats-Msg-Id", a.id+":0."+tag)
		m.Header.Set("EA-Cause", a.id)
		m.Header.Set("EA-Type", "count")
		data, err := msgpack.Marshal(map[string]int64{"count": count})
		if err != nil {
			t.Fatal(err)
		}
		m.Data = data
		pubMsg(m)
	}
	dead := func(a applied) {
		t.Helper()
		m := nats.NewMsg("ea.dead.counter." + a.counter)
		m.Header.Set("Nats-Msg-Id", "dead-"+a.id)
		m.Header.Set("EA-Seq", fmt.Sprint(a.seq))
		m.Header.Set("EA-Dead-Reason", "rejected")
		pubMsg(m)
	}
	const tag, tag2 = "0123456789abcdef0123", "fedcba9876543210fedc"
	for _, a := range log {
		switch {
		case a.bad:
			if !l.skipDead {
				dead(a)
			}
			if l.applyBad {
				output(a, tag, a.count)
			}
		case a.id == l.skipOutput:
		default:
			count := a.count
			if a.id == l.offBy {
				count++
			}
			output(a, tag, count)
			if a.id == l.twice {
				output(a, tag2, count)
			}
			if a.id == l.deadGood {
				dead(a)
			}
		}
	}
	kv, err := js.KeyValue(ctx, "ea_state")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pub.counters {
		n := counts[c]
		if c == "b" && l.stateOff {
			n++
		}
		doc, err := msgpack.Marshal(map[string]any{"id": c, "kind": "counter", "status": "IDLE",
			"state": map[string]int64{"count": n}, "seq": last[c]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "counter."+c, doc); err != nil {
			t.Fatal(err)
		}
	}
	return pub
}
