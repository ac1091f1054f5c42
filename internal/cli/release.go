package cli

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Returning memory after a burst. The Go runtime keeps what a burst of
// work made it map: it frees garbage only at its next collection, which an
// idle process with little to allocate reaches late, and it returns freed
// pages to the operating system slowly and only down to its next heap goal,
// itself set from the live heap of the burst. Measured with bench/scale
// (BENCHMARKS.md, "Node memory and 10,000 active"): a node with 10,000
// active counters stayed at 160–320 MiB of RSS after a burst of 20,000
// records while its live heap was ~25 MiB. A low memory limit
// (GOMEMLIMIT, --memory-limit) brings that down too, but it makes the
// collector run all through the burst when the burst's own memory is over
// it: at 80 MiB the same burst ran at 12–15 % of the rate.
//
// So a node binary watches its allocation rate and, once it has been quiet
// for two samples after allocating much (the first time after a burst
// whatever the live heap of the last collection, made under the burst's
// load, says, and however soon after the last return; later when retained
// exceeds it by Slack, at most once per Gap), collects and
// returns the free memory at once ([debug.FreeOSMemory]): one full
// collection of the live heap, when there is nothing else to do, instead of
// a larger process until the runtime gets around to it. Its cost: a process quiet for long with a
// live heap well over Slack may keep the runtime's ordinary headroom (GOGC)
// over Slack too, and then collects once per Gap: scaled from the
// measurement below, about 2 % of a core at 200 MiB of live heap.

// ReleaseOptions tune [ReleaseWhenQuiet]; the zero value takes the defaults.
type ReleaseOptions struct {
	// Every is how often the allocation rate is sampled. Default 250ms: two
	// quiet samples, so memory is back about half a second after a burst.
	Every time.Duration
	// Quiet is the allocation rate, in bytes per second, under which the
	// process counts as quiet. Default 4 MiB/s.
	Quiet uint64
	// Slack is how much more than the live heap the process may keep
	// mapped before it returns memory. Default 32 MiB.
	Slack uint64
	// Gap is the least time between two returns when no burst came
	// between them. Default 5s: a return is a full collection of the live
	// heap (13–16 ms for 25 MiB in 120,000 objects, measured on the
	// machine of BENCHMARKS.md). The first quiet moment after a burst
	// returns memory without waiting for Gap: at most one return per burst
	// and its two quiet samples, and never sooner after the last return
	// than 50 times what that one took (at most 2 % of the time).
	Gap time.Duration
}

// ReleaseWhenQuiet starts a goroutine that returns memory to the operating
// system once the process goes quiet after a burst (see above); each return
// is logged at debug level. stop ends it and waits for it.
func ReleaseWhenQuiet(ctx context.Context, o ReleaseOptions, log *slog.Logger) (stop func()) {
	o.Every = orDuration(o.Every, 250*time.Millisecond)
	o.Gap = orDuration(o.Gap, 5*time.Second)
	if o.Quiet == 0 {
		o.Quiet = 4 << 20
	}
	if o.Slack == 0 {
		o.Slack = 32 << 20
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { releaseLoop(ctx, o, log) })
	return func() { cancel(); wg.Wait() }
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// costShare bounds how much of its time a process that bursts often spends
// returning memory: the next return after a burst waits costShare times as
// long as the last return took (2 %).
const costShare = 50

func releaseLoop(ctx context.Context, o ReleaseOptions, log *slog.Logger) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},               // cumulative bytes allocated
		{Name: "/memory/classes/total:bytes"},         // all memory the runtime mapped
		{Name: "/memory/classes/heap/released:bytes"}, // of it, returned to the system
		{Name: "/gc/heap/live:bytes"},                 // live heap at the last collection
	}
	read := func() (allocs, retained, live uint64) {
		metrics.Read(samples)
		v := func(i int) uint64 {
			if samples[i].Value.Kind() != metrics.KindUint64 {
				return 0 // not in this Go release: never release
			}
			return samples[i].Value.Uint64()
		}
		return v(0), v(1) - min(v(2), v(1)), v(3)
	}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	prev, _, _ := read()
	quiet := 0
	burst := false // allocated much since the last return
	var last time.Time
	var cost time.Duration // how long the last return took
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			allocs, retained, live := read()
			rate := float64(allocs-prev) / o.Every.Seconds()
			prev = allocs
			if rate >= float64(o.Quiet) {
				quiet, burst = 0, true
				continue
			}
			quiet++
			if quiet < 2 || live == 0 || retained <= o.Slack {
				continue
			}
			// The live heap is the one of the last collection. Right after a
			// burst that one was made under load, with the burst's records
			// still live: retained may be within Slack of it though most of it
			// is garbage now, and nothing collects an idle process for two
			// minutes. So the first quiet moment after a burst returns
			// memory whatever the stale figure says, however soon after the
			// last return (a burst that follows another within Gap, the load
			// after a start-up's activations, would otherwise keep its memory
			// until Gap ends); later ones only when retained is over it by
			// Slack, and Gap after the last.
			if !burst && (retained <= live+o.Slack || now.Sub(last) < o.Gap) {
				continue
			}
			if burst && now.Sub(last) < costShare*cost {
				continue // returns after bursts take at most 1/costShare of the time
			}
			burst = false
			last = now
			debug.FreeOSMemory()
			cost = time.Since(now)
			_, after, liveAfter := read()
			log.Debug("returned memory to the system after a burst", "retained_before", retained, "retained_after", after, "live_heap", liveAfter)
		}
	}
}
