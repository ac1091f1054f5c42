package remote_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
)

// BenchmarkHop measures what a remote kind's hop costs against the same
// counter as a Go kind in-process, in the same run on one server and node:
// the Go counter (examples/kinds), and the counter served by a Go worker
// (raw nats.go, generic decoding), the JavaScript worker and the Python
// worker, each in the encodings it speaks.
//
//   - latency: one inc record at a time to one counter, published and
//     awaited on the counter's outbox before the next: ns/op is the time from
//     publish to output of one record.
//
//   - throughput: b.N inc records over 64 counters, published at once, until
//     every output is out (then every count is checked): ns/op is per
//     record, with requests to the workers in flight in parallel.
//
//     go test -run '^$' -bench BenchmarkHop -benchtime 1000x ./remote/
func BenchmarkHop(b *testing.B) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	names := conn.Names()
	impls := []struct {
		name, kind string
		enc        remote.Encoding
		start      func(b *testing.B, kind string)
	}{
		{"go-kind", "counter", "", nil},
		{"go-worker-json", "go-json", remote.JSON, func(b *testing.B, kind string) { startGoWorker(b, srv.URL, names, kind, counter) }},
		{"go-worker-msgpack", "go-msgpack", remote.Msgpack, func(b *testing.B, kind string) { startGoWorker(b, srv.URL, names, kind, counter) }},
		{"js-worker-json", "js-json", remote.JSON, func(b *testing.B, kind string) { workers[0].start(b, "js", srv.URL, kind) }},
		{"js-worker-msgpack", "js-msgpack", remote.Msgpack, func(b *testing.B, kind string) { workers[0].start(b, "js", srv.URL, kind) }},
		{"python-worker-json", "py-json", remote.JSON, func(b *testing.B, kind string) { workers[1].start(b, "python", srv.URL, kind) }},
	}
	defs := []actor.Definition{kinds.Counter()}
	for _, im := range impls[1:] {
		rk, err := remote.New(conn, im.kind, remote.Options{Encoding: im.enc})
		if err != nil {
			b.Fatal(err)
		}
		defs = append(defs, rk)
	}
	actortest.StartNode(b, conn, actor.Options{Logger: slog.New(slog.DiscardHandler)}, defs...)
	c := newClient(b, conn)
	create := func(b *testing.B, kind string, n int) []records.Ref {
		refs := make([]records.Ref, n)
		for i := range refs {
			refs[i] = records.Ref{Kind: kind, ID: fmt.Sprintf("b%d-%d", runs.Add(1), i)}
			actortest.Create(b, c, refs[i], nil)
		}
		return refs
	}
	inc := func(b *testing.B, ref records.Ref) *nats.Msg {
		rec, err := records.New("inc", nil)
		if err != nil {
			b.Fatal(err)
		}
		return rec.Msg(names.Mailbox(ref))
	}

	latency := func(b *testing.B, kind string) {
		ref := create(b, kind, 1)[0]
		outs := make(chan *nats.Msg, 1)
		sub, err := conn.NATS().ChanSubscribe(names.Outbox(ref), outs)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		ctx := ctxT(b)
		b.ResetTimer()
		for range b.N {
			if _, err := conn.JetStream().PublishMsg(ctx, inc(b, ref)); err != nil {
				b.Fatal(err)
			}
			select {
			case <-outs:
			case <-time.After(time.Minute):
				b.Fatal("no output within a minute")
			}
		}
		b.StopTimer()
		waitCount(b, c, ref, int64(b.N), time.Minute)
	}

	throughput := func(b *testing.B, kind string) {
		const effectors = 64
		refs := create(b, kind, effectors)
		var got atomic.Int64
		done := make(chan struct{})
		sub, err := conn.NATS().Subscribe(names.KindOutboxes(kind), func(m *nats.Msg) {
			if got.Add(1) == int64(b.N) {
				close(done)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		msgs := make([]*nats.Msg, b.N)
		for i := range msgs {
			msgs[i] = inc(b, refs[i%effectors])
		}
		b.ResetTimer()
		futures := make([]jetstream.PubAckFuture, 0, b.N)
		for _, m := range msgs {
			f, err := conn.JetStream().PublishMsgAsync(m)
			if err != nil {
				b.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("%d of %d outputs after 5 minutes", got.Load(), b.N)
		}
		b.StopTimer()
		for i, ref := range refs {
			want := int64(b.N / effectors)
			if i < b.N%effectors {
				want++
			}
			waitCount(b, c, ref, want, time.Minute)
		}
	}

	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			if im.start != nil {
				im.start(b, im.kind)
			}
			b.Run("latency", func(b *testing.B) { latency(b, im.kind) })
			b.Run("throughput", func(b *testing.B) { throughput(b, im.kind) })
		})
	}
}

// BenchmarkApply measures the hop alone: the kind's logic through
// actor.Kind.Apply (no mailbox, no state write, no output published), for
// the Go counter in-process and the counter as a remote kind served by each
// worker: one request-reply over NATS with its encoding and decoding, one
// at a time. ns/op is per record.
//
//	go test -run '^$' -bench BenchmarkApply -benchtime 2000x ./remote/
func BenchmarkApply(b *testing.B) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	names := conn.Names()
	rec, err := records.NewJSON("inc", map[string]int{"by": 2})
	if err != nil {
		b.Fatal(err)
	}
	self := records.Ref{Kind: "counter", ID: "c1"}
	b.Run("go-kind", func(b *testing.B) {
		k := kinds.Counter()
		s := k.Initial
		ctx := ctxT(b)
		for range b.N {
			if s, _, err = k.Apply(ctx, self, rec, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, im := range []struct {
		name  string
		enc   remote.Encoding
		start func(b *testing.B, kind string)
	}{
		{"go-worker-json", remote.JSON, func(b *testing.B, kind string) { startGoWorker(b, srv.URL, names, kind, counter) }},
		{"go-worker-msgpack", remote.Msgpack, func(b *testing.B, kind string) { startGoWorker(b, srv.URL, names, kind, counter) }},
		{"js-worker-json", remote.JSON, func(b *testing.B, kind string) { workers[0].start(b, "js", srv.URL, kind) }},
		{"js-worker-msgpack", remote.Msgpack, func(b *testing.B, kind string) { workers[0].start(b, "js", srv.URL, kind) }},
		{"python-worker-json", remote.JSON, func(b *testing.B, kind string) { workers[1].start(b, "python", srv.URL, kind) }},
	} {
		b.Run(im.name, func(b *testing.B) {
			kind := "k" + fmt.Sprint(runs.Add(1))
			im.start(b, kind)
			k, err := remote.New(conn, kind, remote.Options{Encoding: im.enc})
			if err != nil {
				b.Fatal(err)
			}
			s := k.Initial
			self := records.Ref{Kind: kind, ID: "c1"}
			ctx := ctxT(b)
			b.ResetTimer()
			for range b.N {
				if s, _, err = k.Apply(ctx, self, rec, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var st struct {
				Count int64 `json:"count"`
			}
			if err := json.Unmarshal(mustJSON(b, s), &st); err != nil || st.Count != 2*int64(b.N) {
				b.Fatalf("count %d (%v), want %d", st.Count, err, 2*b.N)
			}
		})
	}
}

var runs atomic.Int64

func mustJSON(b *testing.B, s remote.State) []byte {
	j, err := s.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return j
}
