package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkCeiling measures what one embedded server does at most on this
// machine, with the same client and storage as the other benchmarks: b.N
// records published asynchronously into the mailbox stream (publish/s,
// every acknowledgement awaited), then read back by one durable pull
// consumer that acknowledges each (consume/s). A hop needs at least two
// writes (the output and the state) and one read (the mailbox record), so
// no runtime on this server can process more than
//
//	hop-ceiling = 1 / (2/publish + 1/consume)   records/s
//
// which is what the throughput of BenchmarkThroughput is compared with
// (bench/compare.sh prints the ratio).
func BenchmarkCeiling(b *testing.B) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	ctx := context.Background()
	total := max(b.N, 1000)
	stream, err := conn.MailboxStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	t0 := time.Now()
	publish(b, conn, counters(100), total)
	pub := time.Since(t0)

	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       "ceiling",
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxAckPending: 256,
	})
	if err != nil {
		b.Fatal(err)
	}
	var seen atomic.Int64
	done := make(chan struct{})
	t1 := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if seen.Add(1) == int64(total) {
			close(done)
		}
	}, jetstream.PullMaxMessages(256))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d records", seen.Load(), total)
	}
	read := time.Since(t1)
	b.StopTimer()
	pubRate := float64(total) / pub.Seconds()
	readRate := float64(total) / read.Seconds()
	b.ReportMetric(pubRate, "publish/s")
	b.ReportMetric(readRate, "consume/s")
	b.ReportMetric(1/(2/pubRate+1/readRate), "hop-ceiling-rec/s")
}
