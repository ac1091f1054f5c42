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
	for _, name := range []string{"jetstream", "publisher"} {
		b.Run(name, func(b *testing.B) {
			srv := bustest.NewServer(b)
			nc, js := srv.Client(b)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
				b.Fatal(err)
			}
			publish := func(m *nats.Msg) error { _, err := js.PublishMsg(ctx, m); return err }
			if name == "publisher" {
				p, err := bus.NewPublisher(nc, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				publish = func(m *nats.Msg) error { _, err := p.PublishMsg(ctx, m); return err }
			}
			data := make([]byte, 128)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				m := nats.NewMsg("s.x")
				m.Data = data
				m.Header.Set(jetstream.MsgIDHeader, strconv.Itoa(i))
				if err := publish(m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
