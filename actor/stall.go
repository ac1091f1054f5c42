package actor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// stallLogs is the most stalled effectors named in the log at one look; the
// rest are counted in one line (when NATS is down, all of them stall).
const stallLogs = 10

// stalls tracks the effectors the watchdog found stalled: records waiting
// for them (held, or in hand) and no batch finished for longer than
// Options.StallAfter. Only the
// watchdog goroutine (Node.watch) uses it; the counts it publishes are read
// by the metrics collector through Node.stalledByKind.
type stalls struct {
	since map[records.Ref]time.Time // stalled effectors, by when first seen so
}

// lookForStalls finds the stalled effectors among loaded, logs those that
// became stalled (with their partition's consumer state, asked of the
// server within 2s in all) and those that moved again, and returns the
// count per kind.
func (n *Node) lookForStalls(ctx context.Context, st *stalls, loaded []*effector, now time.Time) map[string]int {
	after := n.opts.StallAfter
	counts := make(map[string]int)
	seen := make(map[records.Ref]bool)
	var fresh []*effector
	for _, e := range loaded {
		held, idle := e.waiting(now)
		if held == 0 || idle < after {
			continue
		}
		counts[e.ref.Kind]++
		seen[e.ref] = true
		if _, ok := st.since[e.ref]; !ok {
			st.since[e.ref] = now.Add(-idle)
			fresh = append(fresh, e)
		}
	}
	for ref, since := range st.since {
		if !seen[ref] {
			delete(st.since, ref)
			n.log.Info("effector moving again after a stall", "effector", ref.String(), "stalled_for", now.Sub(since).Round(time.Millisecond))
		}
	}
	consumers := make(map[slot]string)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for i, e := range fresh {
		if i == stallLogs {
			n.log.Warn("more effectors stalled", "count", len(fresh)-stallLogs, "stall_after", after)
			break
		}
		s := slot{e.ref.Kind, n.names.Partition(e.ref)}
		if _, ok := consumers[s]; !ok {
			consumers[s] = n.consumerState(ctx, s)
		}
		held, idle := e.waiting(now)
		n.log.Warn("effector stalled: records wait and none finished",
			"effector", e.ref.String(), "partition", fmt.Sprintf("%s/%d", s.kind, s.num),
			"held", held, "idle", idle.Round(time.Millisecond), "stall_after", after,
			slog.String("consumer", consumers[s]))
	}
	return counts
}

// waiting returns how many records e holds, the one in hand included, and
// how long its drain goroutine has gone without finishing a batch; 0, 0
// when it has nothing to do.
func (e *effector) waiting(now time.Time) (held int, idle time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return 0, 0
	}
	held = len(e.held)
	if !e.handSince.IsZero() {
		held++
	}
	if e.progress.IsZero() {
		return held, 0 // its drain goroutine is starting
	}
	return held, now.Sub(e.progress)
}

// consumerState describes the partition consumer of s as the server sees
// it, for a log line: what it has delivered and what waits.
func (n *Node) consumerState(ctx context.Context, s slot) string {
	name := n.names.PartitionConsumer(s.kind, s.num)
	var stream jetstream.Stream
	if len(n.streams) > 0 {
		stream = n.streamOf(s.num)
	}
	switch {
	case stream == nil:
		return name + ": stream not open"
	case !n.conn.Connected():
		return name + ": unknown, the NATS connection is down"
	case ctx.Err() != nil:
		return name + ": not asked (no time left)"
	}
	cons, err := stream.Consumer(ctx, name)
	if err != nil {
		return fmt.Sprintf("%s: %v", name, err)
	}
	info := cons.CachedInfo()
	if fresh, err := cons.Info(ctx); err == nil {
		info = fresh
	}
	return fmt.Sprintf("%s: delivered %d, ack floor %d, pending %d, waiting for acks %d, pull requests %d, redelivered %d",
		name, info.Delivered.Stream, info.AckFloor.Stream, info.NumPending, info.NumAckPending, info.NumWaiting, info.NumRedelivered)
}
