package store_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/store"
)

// watchers is how many watchers BenchmarkWatchFanout runs; set
// STORE_BENCH_WATCHERS to change it.
func watchers() int {
	if n, err := strconv.Atoi(os.Getenv("STORE_BENCH_WATCHERS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// BenchmarkWatchFanout writes one effector's state document b.N times with
// 1,000 watchers following it, and measures the fan-out: from the write
// to the last watcher seeing it (p50, p99). "store" watches with
// store.Client.Watch, "raw" with a JetStream KV watch per watcher decoding
// the document itself (the baseline, same run).
//
//	go test -run '^$' -bench WatchFanout -benchtime 200x ./store/
func BenchmarkWatchFanout(b *testing.B) {
	for _, mode := range []string{"raw", "store"} {
		b.Run(mode, func(b *testing.B) { benchFanout(b, mode, watchers()) })
	}
}

func benchFanout(b *testing.B, mode string, n int) {
	e := newEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bucket, err := e.conn.StateBucket(ctx)
	if err != nil {
		b.Fatal(err)
	}
	put := func(seq uint64) uint64 {
		doc := actor.Document{ID: "k1", Kind: "bench", Status: actor.StatusIdle, Seq: seq, Updated: time.Now().UTC()}
		data, err := codec.Marshal(doc)
		if err != nil {
			b.Fatal(err)
		}
		rev, err := bucket.Put(ctx, "bench.k1", data)
		if err != nil {
			b.Fatal(err)
		}
		return rev
	}
	put(0)
	// seen[i] is the latest revision watcher i received; cond wakes the
	// writer when one arrives.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	seen := make([]uint64, n)
	arrived := func(i int, rev uint64) {
		mu.Lock()
		seen[i] = rev
		mu.Unlock()
		cond.Broadcast()
	}
	var wg sync.WaitGroup
	for i := range n {
		switch mode {
		case "raw":
			w, err := bucket.Watch(ctx, "bench.k1")
			if err != nil {
				b.Fatalf("watcher %d: %v", i, err)
			}
			wg.Go(func() {
				defer func() { _ = w.Stop() }()
				for {
					select {
					case <-ctx.Done():
						return
					case en, ok := <-w.Updates():
						if !ok {
							return
						}
						if en == nil {
							continue
						}
						var doc actor.Document // what a watcher needs, as store.Watch gives it
						if err := codec.Unmarshal(en.Value(), &doc); err != nil {
							b.Error(err)
							return
						}
						arrived(i, en.Revision())
					}
				}
			})
		case "store":
			w, err := e.client.Watch(ctx, store.WatchOptions{Kind: "bench", ID: "k1"})
			if err != nil {
				b.Fatalf("watcher %d: %v", i, err)
			}
			wg.Go(func() {
				defer w.Stop()
				for ev := range w.Events() {
					arrived(i, ev.Revision)
				}
			})
		}
	}
	waitAll := func(rev uint64) {
		deadline := time.Now().Add(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		for slices.ContainsFunc(seen, func(s uint64) bool { return s < rev }) {
			if time.Now().After(deadline) {
				b.Fatalf("revision %d not seen by every watcher in a minute", rev)
			}
			cond.Wait()
		}
	}
	waitAll(put(1)) // every watcher is live
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t := time.Now()
		waitAll(put(uint64(i + 2)))
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	cancel()
	cond.Broadcast()
	wg.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}
