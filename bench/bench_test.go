package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The workload: N counters; every record is an "inc" that adds one to the
// counter's state and emits one "count" record on its outbox.

// BenchmarkThroughput measures records/s for 1 and 100 effectors. Records are
// published before the clock starts; the clock stops when every output has
// been observed. records/s is the steady state (the last nine tenths of the
// outputs); records/s-with-start includes starting the consumers.
//
// ceiling is not the runtime: it measures, in the same run, what the server
// does with the hop's JetStream operations alone (see ceiling).
func BenchmarkThroughput(b *testing.B) {
	b.Run("ceiling", func(b *testing.B) { ceiling(b, false) })
	b.Run("ceiling-bare", func(b *testing.B) { ceiling(b, true) })
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("rawmin/effectors=%d", n), func(b *testing.B) { throughput(b, n, startRawMin) })
		b.Run(fmt.Sprintf("raw/effectors=%d", n), func(b *testing.B) { throughput(b, n, startRaw) })
		b.Run(fmt.Sprintf("actor/effectors=%d", n), func(b *testing.B) { throughput(b, n, startActor) })
		b.Run(fmt.Sprintf("actor1/effectors=%d", n), func(b *testing.B) { throughput(b, n, startActorOnePerWrite) })
	}
}

// BenchmarkLatency measures publish-to-observed-output latency one record at
// a time on one effector (light load). b.N records; reports p50 and p99.
func BenchmarkLatency(b *testing.B) {
	b.Run("rawmin", func(b *testing.B) { latency(b, startRawMin) })
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
	total := max(b.N, n, 1000)
	var seen atomic.Int64
	done := make(chan struct{})
	var tenth time.Time // when a tenth of the outputs were seen
	sub, err := conn.NATS().Subscribe("ea.out.>", func(*nats.Msg) {
		switch seen.Add(1) {
		case int64(total / 10):
			tenth = time.Now()
		case int64(total):
			close(done)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	publish(b, conn, counters(n), total)
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuTime()
	start()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("saw %d of %d outputs", seen.Load(), total)
	}
	b.StopTimer()
	end, cpu := time.Now(), cpuTime()-cpu0
	// Steady state: the last nine tenths, after start-up (creating consumers,
	// a node attaching its effectors) is over.
	b.ReportMetric(float64(total-total/10)/end.Sub(tenth).Seconds(), "records/s")
	b.ReportMetric(float64(total)/end.Sub(t0).Seconds(), "records/s-with-start")
	// CPU of the whole process (server and client) per record: far less
	// sensitive to a noisy machine than the rate.
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/record")
}

// ceiling measures the most a hop can reach on this machine in this run:
// the rate at which the server stores records published asynchronously
// (the workload's records, window 4,096) and the rate at which it serves
// them to one pull consumer that acknowledges each (Consume, 500 at a time).
// A hop writes twice (its output and its state document) and reads once
// (its record; the records are published before a throughput run's clock
// starts), so it can reach at most 1 / (2/publish + 1/consume) records/s,
// reported as records/s beside publish-msg/s and consume-msg/s. (A state
// write is a KV put: a publish to the bucket's stream.) With bare, the
// messages are 128 bytes of payload without headers, as JETSTREAM.md's
// figures were measured; without, they are the workload's records.
func ceiling(b *testing.B, bare bool) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	ctx := context.Background()
	total := max(b.N, 1000)
	b.ResetTimer()
	t0 := time.Now()
	if bare {
		publishBare(b, conn, counters(100), total)
	} else {
		publish(b, conn, counters(100), total)
	}
	pub := float64(total) / time.Since(t0).Seconds()
	stream, err := conn.MailboxStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       "ceiling",
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxAckPending: 1000,
	})
	if err != nil {
		b.Fatal(err)
	}
	var acked atomic.Int64
	done := make(chan struct{})
	t1 := time.Now()
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if err := msg.Ack(); err != nil {
			b.Error(err)
		}
		if acked.Add(1) == int64(total) {
			close(done)
		}
	}, jetstream.PullMaxMessages(500))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", acked.Load(), total)
	}
	consume := float64(total) / time.Since(t1).Seconds()
	b.StopTimer()
	b.ReportMetric(1/(2/pub+1/consume), "records/s")
	b.ReportMetric(pub, "publish-msg/s")
	b.ReportMetric(consume, "consume-msg/s")
}

func latency(b *testing.B, st starter) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	start, stop := st(b, conn, 1)
	defer stop()
	start()
	outs := make(chan struct{}, 1)
	sub, err := conn.NATS().Subscribe("ea.out.>", func(*nats.Msg) { outs <- struct{}{} })
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
		if _, err := conn.JetStream().PublishMsg(ctx, rec.Msg(subject)); err != nil {
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
	cpu0 := cpuTime()
	for range b.N {
		lat = append(lat, one())
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	// CPU of the whole process (server, node and this loop) per record: on
	// two cores shared by all of them, CPU on the record's path is latency.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/record")
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
		f, err := conn.JetStream().PublishMsgAsync(rec.Msg(conn.Names().Mailbox(refs[i%len(refs)])))
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	awaitAcks(b, futures)
}

// awaitAcks fails the benchmark unless every publish is acknowledged.
func awaitAcks(b *testing.B, futures []jetstream.PubAckFuture) {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
}

// publishBare puts total messages of 128 bytes without headers round-robin
// into the counters' mailboxes.
func publishBare(b *testing.B, conn *bus.Conn, refs []records.Ref, total int) {
	payload := make([]byte, 128)
	subjects := make([]string, len(refs))
	for i, r := range refs {
		subjects[i] = conn.Names().Mailbox(r)
	}
	futures := make([]jetstream.PubAckFuture, 0, total)
	for i := range total {
		f, err := conn.JetStream().PublishAsync(subjects[i%len(subjects)], payload)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	awaitAcks(b, futures)
}

// startActor creates the counters through a node, then stops it; start runs
// a fresh node that attaches them and processes their mailboxes.
// startActor runs the runtime with the counter kind as defined: records
// waiting for one effector are applied in batches (Kind.MaxBatch 64).
func startActor(b *testing.B, conn *bus.Conn, n int) (start, stop func()) {
	return startActorWith(b, conn, n, kinds.Counter())
}

// startActorOnePerWrite runs the runtime applying one record per state write
// (Kind.MaxBatch 1): the per-record hop, the baseline of batching.
func startActorOnePerWrite(b *testing.B, conn *bus.Conn, n int) (start, stop func()) {
	k := kinds.Counter()
	k.MaxBatch = 1
	return startActorWith(b, conn, n, k)
}

func startActorWith(b *testing.B, conn *bus.Conn, n int, kind actor.Kind[kinds.CounterState]) (start, stop func()) {
	ctx := context.Background()
	run := func() (stop func()) {
		node, err := actor.NewNode(conn, actor.Options{Logger: discard()})
		if err != nil {
			b.Fatal(err)
		}
		if err := node.Host(kind); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- node.Run(ctx) }()
		if err := node.WaitReady(ctx); err != nil {
			b.Fatal(err)
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
// for each message it adds one to the state it keeps in memory, publishes one
// output carrying the wire contract's envelope (the same headers and payload
// an effector emits) and waits for its ack, writes the state document (the
// same fields) to KV with compare-and-set on the revision it knows, and acks
// the message.
func startRaw(b *testing.B, conn *bus.Conn, n int) (start, stop func()) {
	return rawBaseline(b, conn, n, false)
}

// startRawMin is startRaw without the envelope: the output carries only
// Nats-Msg-Id and the state is just the count. It shows what the wire
// contract itself costs.
func startRawMin(b *testing.B, conn *bus.Conn, n int) (start, stop func()) {
	return rawBaseline(b, conn, n, true)
}

// rawDoc is the state document, encoded as the runtime encodes it.
type rawDoc struct {
	ID      string             `json:"id"`
	Kind    string             `json:"kind"`
	Status  string             `json:"status"`
	State   kinds.CounterState `json:"state"`
	Seq     uint64             `json:"seq"`
	Updated time.Time          `json:"updated"`
}

func rawBaseline(b *testing.B, conn *bus.Conn, n int, minimal bool) (start, stop func()) {
	ctx := context.Background()
	stream, err := conn.MailboxStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		b.Fatal(err)
	}
	type counter struct {
		ref  records.Ref
		from string
		cons jetstream.Consumer
		doc  rawDoc
		rev  uint64
	}
	cs := make([]*counter, n)
	for i, r := range counters(n) {
		c := &counter{ref: r, from: r.String(), doc: rawDoc{ID: r.ID, Kind: r.Kind, Status: "IDLE"}}
		c.cons, err = stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       "raw_" + r.ID,
			FilterSubject: conn.Names().StoredMailbox(r),
			AckPolicy:     jetstream.AckExplicitPolicy,
			MaxAckPending: 64,
		})
		if err != nil {
			b.Fatal(err)
		}
		data, _ := codec.Marshal(c.doc)
		if c.rev, err = bucket.Create(ctx, "raw."+r.ID, data); err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	var ccs []jetstream.ConsumeContext
	var stopping atomic.Bool
	fail := func(err error) {
		if !stopping.Load() { // a record in hand when stop is called may fail: fine
			b.Error(err)
		}
	}
	return func() {
			for _, c := range cs {
				outbox := conn.Names().Outbox(c.ref)
				cc, err := c.cons.Consume(func(msg jetstream.Msg) {
					id := msg.Headers().Get(jetstream.MsgIDHeader)
					c.doc.State.Count++
					out := nats.NewMsg(outbox)
					out.Data, _ = codec.Marshal(kinds.Count{Count: c.doc.State.Count})
					out.Header.Set(jetstream.MsgIDHeader, id+":0")
					var data []byte
					if minimal {
						data, _ = codec.Marshal(c.doc.State)
					} else {
						now := time.Now().UTC()
						out.Header.Set(records.HeaderType, "count")
						out.Header.Set(records.HeaderFrom, c.from)
						out.Header.Set(records.HeaderCause, id)
						out.Header.Set(records.HeaderTime, now.Format(time.RFC3339Nano))
						out.Header.Set(records.HeaderContentType, records.ContentMsgpack)
						meta, err := msg.Metadata()
						if err != nil {
							fail(err)
							return
						}
						c.doc.Seq, c.doc.Updated = meta.Sequence.Stream, now
						data, _ = codec.Marshal(c.doc)
					}
					if _, err := conn.JetStream().PublishMsg(ctx, out); err != nil {
						fail(err)
						return
					}
					rev, err := bucket.Update(ctx, "raw."+c.ref.ID, data, c.rev)
					if err != nil {
						fail(err)
						return
					}
					c.rev = rev
					_ = msg.Ack()
				}, jetstream.PullMaxMessages(64))
				if err != nil {
					b.Fatal(err)
				}
				ccs = append(ccs, cc)
			}
		}, func() {
			stopping.Store(true)
			for _, cc := range ccs {
				cc.Stop()
			}
		}
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
