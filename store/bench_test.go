package store_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// benchSizes are the log sizes of BenchmarkProcessQuery; set
// STORE_BENCH_SIZES (comma-separated) to change them.
func benchSizes() []int {
	s := os.Getenv("STORE_BENCH_SIZES")
	if s == "" {
		s = "10000,100000,1000000"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// fill publishes n records (128-byte payloads) to 1,000 mailboxes and
// outboxes, in 10,000 processes, with process "target" on exactly 50 of
// them spread evenly over the log; then waits for the indexer.
func fill(b *testing.B, e *env, n int) {
	b.Helper()
	ctx := context.Background()
	js, err := jetstream.New(e.conn.NATS(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 128)
	every := max(n/50, 1)
	start := time.Now()
	for i := range n {
		subject := "ea.mbox.w." + strconv.Itoa(i%1000)
		if i%2 == 1 {
			subject = "ea.out.w." + strconv.Itoa(i%1000)
		}
		process := "p" + strconv.Itoa(i%10_000)
		if i%every == every/2 {
			process = "target"
		}
		m := nats.NewMsg(subject)
		m.Header.Set(records.HeaderID, "r"+strconv.Itoa(i))
		m.Header.Set(records.HeaderType, "task")
		m.Header.Set(records.HeaderProcess, process)
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
	published := time.Since(start)
	waitIndexed(ctx, b, e.client, 50*time.Millisecond)
	b.Logf("log of %d records: published in %s, indexed %s later (%.0f records/s indexed)",
		n, published.Round(time.Millisecond), (time.Since(start) - published).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
}

// waitIndexed polls client's IndexLag every poll until the indexer has
// caught up, for up to 10 minutes.
func waitIndexed(ctx context.Context, b *testing.B, client *store.Client, poll time.Duration) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		lag, err := client.IndexLag(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("indexer still %d behind", lag)
		}
		time.Sleep(poll)
	}
}

// latencies runs op b.N times and reports p50 and p99 in microseconds.
func latencies(b *testing.B, op func() int) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	got := 0
	for b.Loop() {
		t := time.Now()
		got = op()
		d = append(d, time.Since(t))
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[(len(d)*99)/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(got), "records")
}

// BenchmarkProcessQuery reads the 50 records of one process among logs of
// growing size: through the process index (oldest and newest first), and
// by the naive alternative, a scan of both streams' headers.
func BenchmarkProcessQuery(b *testing.B) {
	for _, n := range benchSizes() {
		e := newEnv(b)
		fill(b, e, n)
		ctx := context.Background()
		for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
			name := "oldest"
			if order == store.NewestFirst {
				name = "newest"
			}
			b.Run(fmt.Sprintf("log=%d/index-%s", n, name), func(b *testing.B) {
				latencies(b, func() int {
					p, err := e.client.Query(ctx, store.Query{Process: "target", Order: order})
					if err != nil || len(p.Records) != 50 {
						b.Fatalf("%d records, %v", len(p.Records), err)
					}
					return len(p.Records)
				})
			})
		}
		b.Run(fmt.Sprintf("log=%d/index-count", n), func(b *testing.B) {
			latencies(b, func() int {
				c, err := e.client.Count(ctx, store.Query{Process: "target"})
				if err != nil || c != 50 {
					b.Fatalf("count %d, %v", c, err)
				}
				return int(c)
			})
		})
		b.Run(fmt.Sprintf("log=%d/effector-newest", n), func(b *testing.B) {
			latencies(b, func() int {
				p, err := e.client.Query(ctx, store.Query{Effector: records.Ref{Kind: "w", ID: "7"}, Order: store.NewestFirst, Limit: 50})
				if err != nil || len(p.Records) != min(50, n/1000) {
					b.Fatalf("%d records, %v", len(p.Records), err)
				}
				return len(p.Records)
			})
		})
		b.Run(fmt.Sprintf("log=%d/get-by-id", n), func(b *testing.B) {
			id := "r" + strconv.Itoa(n/2)
			latencies(b, func() int {
				r, err := e.client.Get(ctx, id)
				if err != nil || r.ID != id {
					b.Fatalf("get %s: %v", id, err)
				}
				return 1
			})
		})
		b.Run(fmt.Sprintf("log=%d/naive-scan", n), func(b *testing.B) {
			latencies(b, func() int { return naiveScan(b, e, "target") })
		})
	}
}

// naiveScan finds a process's records without an index: it reads the
// headers of every record of both streams with an ordered consumer.
func naiveScan(b *testing.B, e *env, process string) int {
	ctx := context.Background()
	found := 0
	for _, stream := range []string{"EA_MBOX", "EA_OUT"} {
		cons, err := e.conn.JetStream().OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{HeadersOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		pending := cons.CachedInfo().NumPending
		for read := uint64(0); read < pending; {
			batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			for m := range batch.Messages() {
				read++
				if m.Headers().Get(records.HeaderProcess) == process {
					found++
				}
			}
			if batch.Error() != nil {
				b.Fatal(batch.Error())
			}
		}
	}
	if found != 50 {
		b.Fatalf("naive scan found %d", found)
	}
	return found
}

// BenchmarkEffectors lists 100,000 effectors of a kind: one page of 100
// through the store (a cursor of the state bucket), all 100,000 in pages of
// 1,000, and the naive alternative for one page: list every key of the
// kind, sort, read the page's documents.
func BenchmarkEffectors(b *testing.B) {
	const n = 100_000
	e := newEnv(b)
	ctx := context.Background()
	js, err := jetstream.New(e.conn.NATS(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("e%06d", i)
		v, _ := codec.Marshal(actor.Document{ID: id, Kind: "k", Status: actor.StatusIdle, Seq: uint64(i), Updated: time.Now().UTC()})
		if _, err := js.PublishAsync("$KV.ea_state.k."+id, v, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	b.Run("store-page-100", func(b *testing.B) {
		latencies(b, func() int {
			p, err := e.client.Effectors(ctx, store.EffectorQuery{Kind: "k"})
			if err != nil || len(p.Effectors) != 100 {
				b.Fatalf("%d, %v", len(p.Effectors), err)
			}
			return len(p.Effectors)
		})
	})
	b.Run("store-page-100-deep", func(b *testing.B) {
		// A page in the middle: follow cursors to effector 50,000 first.
		q := store.EffectorQuery{Kind: "k", Limit: 1000}
		for range 50 {
			p, err := e.client.Effectors(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			q.Cursor = p.Cursor
		}
		q.Limit = 100
		latencies(b, func() int {
			p, err := e.client.Effectors(ctx, q)
			if err != nil || len(p.Effectors) != 100 {
				b.Fatalf("%d, %v", len(p.Effectors), err)
			}
			return len(p.Effectors)
		})
	})
	b.Run("store-all-100000", func(b *testing.B) {
		latencies(b, func() int {
			total := 0
			q := store.EffectorQuery{Kind: "k", Limit: 1000}
			for {
				p, err := e.client.Effectors(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				total += len(p.Effectors)
				if !p.More {
					break
				}
				q.Cursor = p.Cursor
			}
			if total != n {
				b.Fatalf("listed %d", total)
			}
			return total
		})
	})
	b.Run("naive-page-100", func(b *testing.B) {
		kv, err := e.conn.StateBucket(ctx)
		if err != nil {
			b.Fatal(err)
		}
		latencies(b, func() int {
			lister, err := kv.ListKeysFiltered(ctx, "k.*")
			if err != nil {
				b.Fatal(err)
			}
			var keys []string
			for k := range lister.Keys() {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys[:100] {
				if _, err := kv.Get(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
			return 100
		})
	})
}
