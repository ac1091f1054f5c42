package remote_test

import (
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

// BenchmarkHop measures the cost of a remote kind's hop: b.N inc records to
// one counter, published at once, until the counter has emitted b.N counts,
// for the Go counter in-process (the baseline) and the same counter as a
// remote kind served by a Go worker (raw nats.go, generic decoding), the
// JavaScript worker and the Python worker, in the same run on one server.
// ns/op is per record, up to the state write that applies the last; one
// effector applies its records one at a time (in batches of up to 64 per
// state write), so it is the hop's cost once pipelined.
//
//	go test -run '^$' -bench BenchmarkHop -benchtime 2000x ./remote/
func BenchmarkHop(b *testing.B) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	names := conn.Names()
	defs := []actor.Definition{kinds.Counter()}
	for _, k := range []struct {
		name string
		enc  remote.Encoding
	}{{"go-json", remote.JSON}, {"go-msgpack", remote.Msgpack}, {"js-json", remote.JSON}, {"js-msgpack", remote.Msgpack}, {"py-json", remote.JSON}} {
		rk, err := remote.New(conn, k.name, remote.Options{Encoding: k.enc})
		if err != nil {
			b.Fatal(err)
		}
		defs = append(defs, rk)
	}
	actortest.StartNode(b, conn, actor.Options{Logger: slog.New(slog.DiscardHandler)}, defs...)
	c := newClient(b, conn)

	run := func(b *testing.B, kind string) {
		ref := records.Ref{Kind: kind, ID: fmt.Sprintf("b%d", b.N)}
		actortest.Create(b, c, ref, nil)
		var got atomic.Int64
		done := make(chan struct{})
		sub, err := conn.NC.Subscribe(names.Outbox(ref), func(*nats.Msg) {
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
			rec, err := records.New("inc", nil)
			if err != nil {
				b.Fatal(err)
			}
			msgs[i] = rec.Msg(names.Mailbox(ref))
		}
		b.ResetTimer()
		var futures []jetstream.PubAckFuture
		for _, m := range msgs {
			f, err := conn.JS.PublishMsgAsync(m)
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
			b.Fatalf("%d of %d counts after 5 minutes", got.Load(), b.N)
		}
		// Outputs are published before the state is written: the hop ends
		// with the state write.
		waitCount(b, c, ref, int64(b.N), time.Minute)
		b.StopTimer()
	}
	b.Run("go-kind", func(b *testing.B) { run(b, "counter") })
	b.Run("remote-go-worker/json", func(b *testing.B) {
		startGoWorker(b, srv.URL, names, "go-json", counter)
		run(b, "go-json")
	})
	b.Run("remote-go-worker/msgpack", func(b *testing.B) {
		startGoWorker(b, srv.URL, names, "go-msgpack", counter)
		run(b, "go-msgpack")
	})
	js := workers[0]
	b.Run("remote-js-worker/json", func(b *testing.B) {
		js.start(b, "js", srv.URL, "js-json")
		run(b, "js-json")
	})
	b.Run("remote-js-worker/msgpack", func(b *testing.B) {
		js.start(b, "js", srv.URL, "js-msgpack")
		run(b, "js-msgpack")
	})
	b.Run("remote-python-worker/json", func(b *testing.B) {
		workers[1].start(b, "python", srv.URL, "py-json")
		run(b, "py-json")
	})
}
