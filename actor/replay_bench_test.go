package actor_test

import (
	"testing"
	"time"
)

// BenchmarkReplay: replaying a counter's log of 2,000 records through the
// replay control endpoint (read the mailbox and the dead letters, run the
// logic on each record, compare). Reported as records replayed per second.
func BenchmarkReplay(b *testing.B) {
	const n = 2000
	_, conn := server(b)
	startNode(b, conn, nil)
	c := newClient(b, conn)
	ctx := ctxT(b)
	r := ref("counter", "c1")
	if _, err := c.Create(ctx, r, nil); err != nil {
		b.Fatal(err)
	}
	publishIncs(b, conn, r, n)
	waitCount(b, conn, c, r, n, 2*time.Minute)
	b.ResetTimer()
	for range b.N {
		rep, err := c.Replay(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Equal || rep.Applied != n {
			b.Fatalf("replay: %+v", rep)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
