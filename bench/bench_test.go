package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The workload: N counters; every record is an "inc" that adds one to the
// counter's state and emits one "count" record on its outbox.

// BenchmarkThroughput measures records/s for 1 and 100 effectors. Records are
// published before the clock starts; the clock stops when every output has
// been observed.
func BenchmarkThroughput(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("raw/effectors=%d", n), func(b *testing.B) { throughput(b, n, startRaw) })
		b.Run(fmt.Sprintf("actor/effectors=%d", n), func(b *testing.B) { throughput(b, n, startActor) })
	}
}

// BenchmarkLatency measures publish-to-observed-output latency one record at
// a time on one effector (light load). b.N records; reports p50 and p99.
func BenchmarkLatency(b *testing.B) {
	b.Run("raw", func(b *testing.B) { latency(b, startRaw) })
	b.Run("actor", func(b *testing.B) { latency(b, startActor) })
}

// starter prepares the consumers of counters c0..c<n-1> and returns a func
// that starts processing and a func that stops it.
type starter func(b *testing.B, conn *bus.Conn, n int) (start, stop func())

func counters(n int) []records.Ref {
	refs := make([]records.Ref, n)
	for i := range refs {
		refs[i] = records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
	}
	return refs
}

func throughput(b *testing.B, n int, st starter) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	start, stop := st(b, conn, n)
	defer stop()
	total := max(b.N, n)
	var seen atomic.Int64
	done := make(chan struct{})
	sub, err := conn.NC.Subscribe("ea.out.>", func(*nats.Msg) {
		if seen.Add(1) == int64(total) {
			close(done)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	publish(b, conn, counters(n), total)
	b.ResetTimer()
	t0 := time.Now()
	start()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("saw %d of %d outputs", seen.Load(), total)
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/time.Since(t0).Seconds(), "records/s")
}

func latency(b *testing.B, st starter) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	start, stop := st(b, conn, 1)
	defer stop()
	start()
	outs := make(chan struct{}, 1)
	sub, err := conn.NC.Subscribe("ea.out.>", func(*nats.Msg) { outs <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	ctx := context.Background()
	subject := conn.Names().Mailbox(counters(1)[0])
	one := func() time.Duration {
		rec, err := records.New("inc", nil)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := conn.JS.PublishMsg(ctx, rec.Msg(subject)); err != nil {
			b.Fatal(err)
		}
		select {
		case <-outs:
		case <-time.After(10 * time.Second):
			b.Fatal("no output within 10s")
		}
		return time.Since(t0)
	}
	for range 200 { // warm up
		one()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, one())
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// publish puts total inc records round-robin into the counters' mailboxes.
func publish(b *testing.B, conn *bus.Conn, refs []records.Ref, total int) {
	var futures []jetstream.PubAckFuture
	for i := range total {
		rec, err := records.New("inc", nil)
		if err != nil {
			b.Fatal(err)
		}
		f, err := conn.JS.PublishMsgAsync(rec.Msg(conn.Names().Mailbox(refs[i%len(refs)])))
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
}

// startActor creates the counters through a node, then stops it; start runs
// a fresh node that attaches them and processes their mailboxes.
func startActor(b *testing.B, conn *bus.Conn, n int) (start, stop func()) {
	ctx := context.Background()
	run := func() (stop func()) {
		node, err := actor.NewNode(conn, actor.Options{Logger: discard()})
		if err != nil {
			b.Fatal(err)
		}
		if err := node.Host(kinds.Counter()); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- node.Run(ctx) }()
		for !node.Ready() {
			time.Sleep(time.Millisecond)
		}
		return func() { cancel(); <-done }
	}
	stopSetup := run()
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range counters(n) {
		if _, err := client.Create(ctx, r, nil); err != nil {
			b.Fatal(err)
		}
	}
	stopSetup()
	var stopRun func()
	return func() { stopRun = run() }, func() {
		if stopRun != nil {
			stopRun()
		}
	}
}

// startRaw is the hand-written baseline: one durable consumer per counter;
// for each message it adds one to the state it keeps in memory, publishes
// one output and waits for its ack, writes the state to KV with
// compare-and-set on the revision it knows, and acks the message.
func startRaw(b *testing.B, conn *bus.Conn, n int) (start, stop func()) {
	ctx := context.Background()
	stream, err := conn.Stream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		b.Fatal(err)
	}
	type counter struct {
		ref   records.Ref
		cons  jetstream.Consumer
		state kinds.CounterState
		rev   uint64
	}
	cs := make([]*counter, n)
	for i, r := range counters(n) {
		c := &counter{ref: r}
		c.cons, err = stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       "raw_" + r.ID,
			FilterSubject: conn.Names().Mailbox(r),
			AckPolicy:     jetstream.AckExplicitPolicy,
			MaxAckPending: 64,
		})
		if err != nil {
			b.Fatal(err)
		}
		data, _ := codec.Marshal(c.state)
		if c.rev, err = bucket.Create(ctx, "raw."+r.ID, data); err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	var ccs []jetstream.ConsumeContext
	var mu sync.Mutex
	return func() {
			for _, c := range cs {
				outbox := conn.Names().Outbox(c.ref)
				cc, err := c.cons.Consume(func(msg jetstream.Msg) {
					c.state.Count++
					out := nats.NewMsg(outbox)
					body, _ := codec.Marshal(kinds.Count{Count: c.state.Count})
					out.Data = body
					out.Header.Set(jetstream.MsgIDHeader, msg.Headers().Get(jetstream.MsgIDHeader)+":0")
					if _, err := conn.JS.PublishMsg(ctx, out); err != nil {
						b.Error(err)
						return
					}
					data, _ := codec.Marshal(c.state)
					rev, err := bucket.Update(ctx, "raw."+c.ref.ID, data, c.rev)
					if err != nil {
						b.Error(err)
						return
					}
					c.rev = rev
					_ = msg.Ack()
				}, jetstream.PullMaxMessages(64))
				if err != nil {
					b.Fatal(err)
				}
				mu.Lock()
				ccs = append(ccs, cc)
				mu.Unlock()
			}
		}, func() {
			for _, cc := range ccs {
				cc.Stop()
			}
		}
}
