package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
)

// BenchmarkSyncPublish compares one synchronous publish at a time through
// jetstream's PublishMsg (the baseline) with bus.Publisher, which the
// runtime uses for a record's single output and its compare-and-set.
// cpu-µs/op is the whole process's (server and client).
func BenchmarkSyncPublish(b *testing.B) {
	for _, bm := range []struct {
		name    string
		publish func(*nats.Conn, jetstream.JetStream) (func(context.Context, *nats.Msg) error, func())
	}{
		{"jetstream", func(_ *nats.Conn, js jetstream.JetStream) (func(context.Context, *nats.Msg) error, func()) {
			return func(ctx context.Context, m *nats.Msg) error { _, err := js.PublishMsg(ctx, m); return err }, func() {}
		}},
		{"publisher", func(nc *nats.Conn, _ jetstream.JetStream) (func(context.Context, *nats.Msg) error, func()) {
			p, err := bus.NewPublisher(nc, 0)
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context, m *nats.Msg) error { _, err := p.PublishMsg(ctx, m); return err }, func() { p.Close() }
		}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			srv := bustest.NewServer(b)
			nc, js := srv.Client(b)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
				b.Fatal(err)
			}
			publish, done := bm.publish(nc, js)
			defer done()
			data := make([]byte, 128)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				m := nats.NewMsg("s.x")
				m.Data = data
				m.Header.Set(jetstream.MsgIDHeader, strconv.Itoa(i))
				if err := publish(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
