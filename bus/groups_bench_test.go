//go:build unix

package bus_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkReplicatedWrites stores 128-byte records with asynchronous
// publishes (a window of 4,096) in one stream of one server (replicas=1) and
// in one stream of a 3-server in-process cluster (replicas=3), and reports
// the rate and the process's CPU time per record: the cost of a write and of
// a replicated write (leader and two followers) on this machine, which the
// arithmetic of BENCHMARKS.md ("Past one stream leader") starts from.
func BenchmarkReplicatedWrites(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			var conn *bus.Conn
			if replicas == 1 {
				conn = bustest.NewServer(b).Connect(b)
			} else {
				conn = bustest.NewCluster(b, 3).Connect(b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			name := fmt.Sprintf("BENCH_R%d", replicas)
			if _, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"bench.>"}, Replicas: replicas, Storage: jetstream.FileStorage}); err != nil {
				b.Fatal(err)
			}
			js, err := jetstream.New(conn.NATS(), jetstream.WithPublishAsyncMaxPending(4096))
			if err != nil {
				b.Fatal(err)
			}
			const n = 50_000
			payload := make([]byte, 128)
			b.ResetTimer()
			for range b.N {
				cpu0, start := rusage(b), time.Now()
				for i := range n {
					if _, err := js.PublishAsync(fmt.Sprintf("bench.%d", i%1000), payload, jetstream.WithStallWait(30*time.Second)); err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-js.PublishAsyncComplete():
				case <-ctx.Done():
					b.Fatal("publishes not acknowledged in time")
				}
				secs := time.Since(start).Seconds()
				b.ReportMetric(n/secs, "msgs/s")
				b.ReportMetric(float64((rusage(b)-cpu0).Microseconds())/n, "cpu_us/msg")
			}
		})
	}
}

func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
