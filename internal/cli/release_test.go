package cli_test

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/cli"
)

// retained reads the memory the runtime has mapped and not returned.
func retained() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

var sink [][]byte

// TestReleaseWhenQuiet: after a burst (a live heap, then as much garbage,
// then the live heap dropped) the process keeps the memory while nothing
// collects; once quiet, ReleaseWhenQuiet returns it. Not parallel: it
// measures the process's memory.
func TestReleaseWhenQuiet(t *testing.T) {
	const mib = 1 << 20
	for range 96 {
		sink = append(sink, make([]byte, mib))
	}
	runtime.GC() // the last collection sees 96 MiB live: the next comes at about twice that
	for range 80 {
		b := make([]byte, mib) // garbage below the heap goal: nothing collects it
		b[0] = 1
	}
	sink = nil
	before := retained()
	if before < 150*mib {
		t.Fatalf("retained %d MiB after the burst, want over 150 MiB: the test does not make the burst it needs", before/mib)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := cli.ReleaseWhenQuiet(ctx, cli.ReleaseOptions{Every: 50 * time.Millisecond, Gap: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for retained() > before/2 {
		if time.Now().After(deadline) {
			t.Fatalf("retained %d MiB 30s after going quiet, %d MiB before: nothing was returned", retained()/mib, before/mib)
		}
		time.Sleep(20 * time.Millisecond) // polling the condition
	}
}

// TestReleaseAfterBurstWithStaleLiveHeap: a burst whose last collection saw
// most of its memory live, dropped after it. Retained is then within Slack
// of that stale live heap, and nothing collects an idle process; the first
// quiet moment after the burst returns the memory anyway.
func TestReleaseAfterBurstWithStaleLiveHeap(t *testing.T) {
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := cli.ReleaseWhenQuiet(ctx, cli.ReleaseOptions{Every: 50 * time.Millisecond, Gap: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	defer stop()
	time.Sleep(300 * time.Millisecond) // let it release what came before
	burstLive(t, "the")
}

// burstLive makes a burst of 96 MiB, all live at its last collection and
// dropped after it without garbage, and waits up to 10s for at least half
// of what the process then retains to be returned.
func burstLive(t *testing.T, which string) {
	t.Helper()
	const mib = 1 << 20
	for range 96 {
		b := make([]byte, mib)
		b[0] = 1
		sink = append(sink, b)
	}
	runtime.GC() // the last collection sees 96 MiB live
	sink = nil
	before := retained()
	if before < 90*mib {
		t.Fatalf("%s burst: retained %d MiB, want over 90 MiB: the test does not make the burst it needs", which, before/mib)
	}
	deadline := time.Now().Add(10 * time.Second)
	for retained() > before/2 {
		if time.Now().After(deadline) {
			t.Fatalf("%s burst: retained %d MiB 10s after it, %d MiB before: nothing was returned", which, retained()/mib, before/mib)
		}
		time.Sleep(20 * time.Millisecond) // polling the condition
	}
}

// TestReleaseAfterBurstsCloseTogether: a burst that comes soon after the
// memory of the one before was returned (well within Gap: a node's load
// right after activating its effectors) has its memory returned at its
// first quiet moment too, not once Gap has passed.
func TestReleaseAfterBurstsCloseTogether(t *testing.T) {
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := cli.ReleaseWhenQuiet(ctx, cli.ReleaseOptions{Every: 50 * time.Millisecond, Gap: time.Hour}, slog.New(slog.DiscardHandler))
	defer stop()
	burstLive(t, "first")
	burstLive(t, "second")
}
