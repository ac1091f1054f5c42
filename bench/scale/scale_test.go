package scale_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bench/scale"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

// childEnv makes the test binary act as a scenario's child process (server
// or node) instead of running the tests.
const childEnv = "EFFECTORS_SCALE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		handled, err := scale.Child(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if !handled || err != nil {
			fmt.Fprintln(os.Stderr, "child:", handled, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func testEnv(t *testing.T) (scale.Env, *proctest.Buffer, *proctest.Buffer) {
	t.Helper()
	out, log := &proctest.Buffer{}, &proctest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("report:\n%s\nlogs:\n%s", out, log)
		}
	})
	return scale.Env{Bin: os.Args[0], Dir: t.TempDir(), Log: log, Out: out, ChildEnv: []string{childEnv + "=1"}}, out, log
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantLines(t *testing.T, report string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(report, w) {
			t.Errorf("report lacks %q:\n%s", w, report)
		}
	}
}

func TestActiveSmall(t *testing.T) {
	t.Parallel()
	env, out, _ := testEnv(t)
	err := scale.Active(testCtx(t), env, scale.ActiveConfig{Effectors: 40, Small: 4, Records: 400, Samples: 20})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(),
		"created 60 state documents",
		"activated 4 effectors",
		"throughput over 4 effectors: 400 records",
		"activated 36 more effectors",
		"throughput over 40 effectors: 400 records",
		"throughput 40 / 4 effectors:",
		"activation latency (first record to a passive effector, publish to output seen), 20 samples",
		"RSS 40 active, idle for 0s: node n1 ",
		"CPU per record, µs (user+system, publish to last output and its index entries, ",
		"the record store's index caught up ",
	)
}

func TestMillionSmall(t *testing.T) {
	t.Parallel()
	env, out, _ := testEnv(t)
	err := scale.Million(testCtx(t), env, scale.MillionConfig{Effectors: 300, Window: 16, Samples: 10, Bulk: 30})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(),
		"created 300 state documents",
		"state bucket: 300 values",
		"with 300 passive effectors",
		"10 samples: p50",
		"activated 30 random passive effectors at once",
		"RSS 40 active of 300: node n1 ",
	)
}

func TestFailoverSmall(t *testing.T) {
	t.Parallel()
	env, out, _ := testEnv(t)
	err := scale.Failover(testCtx(t), env, scale.FailoverConfig{Effectors: 30, Nodes: 3,
		NodeArgs: []string{"-heartbeat", "100ms", "-ttl", "400ms"}})
	if err != nil {
		t.Fatal(err)
	}
	report := out.String()
	wantLines(t, report, "partitions per node: ", "killed n1 (", "time from the kill to each effector's output",
		"after the failover: partitions per node: ", "every lease where it was before the kill: true")
	if strings.Contains(report, "driven by: map[n1:") {
		t.Errorf("the killed node still holds leases:\n%s", report)
	}
}

func TestInvalid(t *testing.T) {
	env, _, _ := testEnv(t)
	ctx := testCtx(t)
	for name, err := range map[string]error{
		"env":      scale.Active(ctx, scale.Env{}, scale.ActiveConfig{Effectors: 1, Small: 1, Records: 1}),
		"active":   scale.Active(ctx, env, scale.ActiveConfig{Effectors: 10, Small: 20, Records: 100}),
		"million":  scale.Million(ctx, env, scale.MillionConfig{Effectors: 10, Window: 1, Samples: 11}),
		"failover": scale.Failover(ctx, env, scale.FailoverConfig{Effectors: 10, Nodes: 1}),
		"start":    func() error { _, err := scale.Start("x", io.Discard, nil, ""); return err }(),
		"raw":      scale.Raw(ctx, env, scale.RawConfig{Sizes: []int{1}, Records: 0}),
	} {
		if !errors.Is(err, scale.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestProcExitBeforeLine(t *testing.T) {
	p, err := scale.Start("child", io.Discard, []string{childEnv + "=1"}, os.Args[0], "node") // no -url: exits
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitLine(testCtx(t), "READY"); !errors.Is(err, scale.ErrExited) {
		t.Fatalf("WaitLine: got %v, want ErrExited", err)
	}
}

// TestReadCPU: the CPU time read from /proc grows while this process
// computes.
func TestReadCPU(t *testing.T) {
	before, err := scale.ReadCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var after time.Duration
	x := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		for i := range 1_000_000 {
			x ^= i
		}
		if after, err = scale.ReadCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
	}
	if after <= before {
		t.Fatalf("CPU time %s after computing, %s before (x %d)", after, before, x)
	}
	if _, err := scale.ReadCPU(-1); err == nil {
		t.Fatal("ReadCPU(-1): no error")
	}
}

func TestReadRSS(t *testing.T) {
	rss, peak, err := scale.ReadRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Fatalf("rss %d, peak %d", rss, peak)
	}
	if _, _, err := scale.ReadRSS(-1); err == nil {
		t.Fatal("ReadRSS(-1): no error")
	}
}

func TestCounters(t *testing.T) {
	refs := scale.Counters("c", 3)
	want := []records.Ref{{Kind: "counter", ID: "c0"}, {Kind: "counter", ID: "c1"}, {Kind: "counter", ID: "c2"}}
	if fmt.Sprint(refs) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", refs, want)
	}
}

func TestRawSmall(t *testing.T) {
	t.Parallel()
	env, out, _ := testEnv(t)
	for _, streams := range []int{0, 2} {
		env.Dir = t.TempDir() // a fresh server store for each
		if err := scale.Raw(testCtx(t), env, scale.RawConfig{Sizes: []int{3, 6}, Records: 60, Streams: streams}); err != nil {
			t.Fatalf("streams %d: %v", streams, err)
		}
	}
	report := out.String()
	wantLines(t, report, "streams 0 (0: the records stream)", "streams 2 (0: the records stream)",
		"3 consumers: 60 records", "6 consumers: 60 records")
	if n := strings.Count(report, "6 consumers: 60 records"); n != 2 {
		t.Errorf("%d runs of 6 consumers, want 2:\n%s", n, report)
	}
}

func TestOutputsCountsEachIDOnce(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	outs, err := scale.WatchOutputs(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outs.Close() }()
	ref := records.Ref{Kind: "counter", ID: "x"}
	for _, id := range []string{"a", "b", "a", "", ""} {
		m := nats.NewMsg(conn.Names().Outbox(ref))
		if id != "" {
			m.Header.Set(nats.MsgIdHdr, id)
		}
		if err := conn.NATS().PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// Delivered in order: the duplicate "a" is counted before the last one.
	if err := outs.WaitTotal(testCtx(t), 4); err != nil {
		t.Fatal(err)
	}
	n, _ := outs.Of(ref)
	if outs.Total() != 4 || outs.Duplicates() != 1 || n != 4 {
		t.Fatalf("total %d, duplicates %d, of x %d; want 4, 1, 4", outs.Total(), outs.Duplicates(), n)
	}
}
