package store_test

import (
	"context"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// BenchmarkIndexer is what indexing costs: b.N records are published to
// mailboxes and outboxes (1,000 effectors) with no indexer running, then a
// store server starts and the clock runs until it has indexed them all.
// It reports records indexed per second and the CPU time of the whole
// process per record (the embedded NATS server and the indexer together:
// what indexing costs the node and the server).
//
//	counter: records as a counter's hop has them (an id and a type)
//	process: every record also has a process (100 of them) and an owner (10)
func BenchmarkIndexer(b *testing.B) {
	for _, c := range []struct {
		name   string
		header func(i int, h nats.Header)
	}{
		{"counter", func(int, nats.Header) {}},
		{"process", func(i int, h nats.Header) {
			h.Set(records.HeaderProcess, "p"+strconv.Itoa(i%100))
			h.Set(records.HeaderOwner, "o"+strconv.Itoa(i%10))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := bustest.NewServer(b)
			conn := srv.Connect(b)
			ctx := context.Background()
			js, err := jetstream.New(conn.NATS(), jetstream.WithPublishAsyncMaxPending(4096))
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 128)
			for i := range b.N {
				subject := "ea.mbox.w." + strconv.Itoa(i%1000)
				if i%2 == 1 {
					subject = "ea.out.w." + strconv.Itoa(i%1000)
				}
				m := nats.NewMsg(subject)
				m.Header.Set(records.HeaderID, "r"+strconv.Itoa(i))
				m.Header.Set(records.HeaderType, "add")
				c.header(i, m.Header)
				m.Data = payload
				if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				b.Fatal("publishing did not complete")
			}
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s, err := store.NewServer(sctx, srv.Connect(b), store.ServerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			done := make(chan error, 1)
			go func() { done <- s.Run(sctx) }()
			waitIndexed(ctx, b, s.Client(), 20*time.Millisecond)
			b.StopTimer()
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/record")
			b.ReportMetric(0, "ns/op")
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIndexLag is how long a record takes to be indexed at a low
// rate: one record published at a time (then 20 ms idle). visible: until
// Get by its id finds it; acked: until the indexer has acknowledged it
// (IndexLag is 0). It reports p50 and p99 of both in milliseconds.
func BenchmarkIndexLag(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	var visible, acked []time.Duration
	i := 0
	for b.Loop() {
		id := "lag" + strconv.Itoa(i)
		i++
		t0 := time.Now()
		publish(b, e.conn, rec{subject: "ea.mbox.w.1", id: id, typ: "t"})
		for {
			if _, err := e.client.Get(ctx, id); err == nil {
				break
			}
			if time.Since(t0) > time.Minute {
				b.Fatalf("%s not indexed in a minute", id)
			}
		}
		visible = append(visible, time.Since(t0))
		for {
			if lag, err := e.client.IndexLag(ctx); err == nil && lag == 0 {
				break
			}
			if time.Since(t0) > time.Minute {
				b.Fatalf("%s not acknowledged in a minute", id)
			}
		}
		acked = append(acked, time.Since(t0))
		b.StopTimer()
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
	}
	for _, d := range []struct {
		name string
		lags []time.Duration
	}{{"visible", visible}, {"acked", acked}} {
		slices.Sort(d.lags)
		b.ReportMetric(float64(d.lags[len(d.lags)/2].Microseconds())/1000, d.name+"-p50-ms")
		b.ReportMetric(float64(d.lags[len(d.lags)*99/100].Microseconds())/1000, d.name+"-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}
