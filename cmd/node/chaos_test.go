//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// The chaos tests run short in make test; -chaos.long (or
// EFFECTORS_CHAOS_LONG=1) runs them long:
//
//	go test -race -count=1 -timeout 30m ./cmd/node -run Chaos -chaos.long -v
var chaosLong = flag.Bool("chaos.long", false,
	"run the chaos tests long: 100,000 increments and a kill every few seconds for minutes (also EFFECTORS_CHAOS_LONG=1)")

func longChaos() bool { return *chaosLong || os.Getenv("EFFECTORS_CHAOS_LONG") != "" }

// chaosCounters sets how many counters TestChaosKillNodes drives (100 by
// default), e.g. -chaos.counters 10000 for 10,000 active effectors.
var chaosCountersFlag = flag.Int("chaos.counters", 0, "counters TestChaosKillNodes drives (default 100)")

// chaosPlan is the load and the faults of a chaos test.
type chaosPlan struct {
	counters int
	incs     int           // in total, round-robin over the counters
	batch    int           // published at once, then awaited
	pace     time.Duration // between batches: publishing lasts incs/batch*pace
	every    time.Duration // between faults
	faults   int           // at least this many; more while publishing lasts
	timeout  time.Duration // of the whole test
}

// Placement settings of the nodes under test: a killed node's closed
// connection is found by the others' liveness probes within about a beat;
// the TTL (which only a frozen node waits out) is long enough not to flap
// with race-built nodes on a loaded machine (see actor's fastPlacement).
var chaosNodeArgs = []string{"--heartbeat", "250ms", "--heartbeat-ttl", "2s", "--idle", "3s", "--shutdown-grace", "5s"}

// TestChaosKillNodes runs 3 ea-node processes on one NATS server, drives 100
// counters from a plain NATS client and, while records flow, kills a random
// node with SIGKILL every few seconds and starts a new one in its place. At
// the end every count is exact, every output is on its outbox once, and
// nothing went to dead letters.
func TestChaosKillNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	plan := chaosPlan{counters: 100, incs: 20_000, batch: 100, pace: 80 * time.Millisecond,
		every: 4 * time.Second, faults: 4, timeout: 4 * time.Minute}
	if raceEnabled { // nodes built with the race detector run a few times slower
		plan.incs = 6_000
	}
	if longChaos() {
		plan.incs, plan.faults, plan.timeout = 100_000, 20, 20*time.Minute
	}
	if *chaosCountersFlag > 0 {
		plan.counters = *chaosCountersFlag
		plan.incs = max(plan.incs, 2*plan.counters)
		plan.timeout = max(plan.timeout, 10*time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), plan.timeout)
	defer cancel()
	t0 := time.Now()

	srv := bustest.NewServer(t)
	nc, js := plainClient(t, srv.URL)
	const nodes = 3
	gen := 0
	start := func(slot int) (*process, string) {
		gen++
		id := fmt.Sprintf("n%d-%d", slot, gen)
		metrics := proctest.FreeAddr(t)
		p := startNode(t, id, metrics, append([]string{"--nats", srv.URL, "--metrics", metrics, "--node-id", id}, chaosNodeArgs...)...)
		p.waitReady(t, 60*time.Second)
		return p, id
	}
	procs := make([]*process, nodes)
	ids := make([]string, nodes)
	for i := range procs {
		procs[i], ids[i] = start(i)
	}
	counters, want := chaosCounters(t, nc, plan)
	stream, bucket := outboxAndState(t, ctx, js)
	markers := watchMarkers(t, ctx, js)

	var published atomic.Int64
	pubDone := make(chan error, 1)
	go func() { pubDone <- publishPaced(ctx, js, counters, plan, &published) }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	hits := 0 // kills of a node that read partitions
	var failovers, readies []time.Duration
	next := time.Now().Add(plan.every / 2)
	for kill := 1; ; kill++ {
		if kill > plan.faults && published.Load() == int64(plan.incs) {
			break
		}
		if !sleepUntil(ctx, next) {
			t.Fatalf("test timed out after %d kills", kill-1)
		}
		next = time.Now().Add(plan.every)
		for i, p := range procs {
			if !p.Running() {
				t.Fatalf("node %s exited by itself: %v", ids[i], p.Err())
			}
		}
		slot := rng.IntN(nodes)
		victim, vid := procs[slot], ids[slot]
		held := markers.count(vid)
		seen := outputs(t, ctx, stream)
		if err := victim.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		victim.Wait(t, 10*time.Second)
		if held > 0 {
			hits++
		}
		// Failover: the others take every partition lease of the dead node
		// once its heartbeat expires.
		for markers.count(vid) > 0 {
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("kill %d: 30s after node %s was killed, %d partition leases still name it", kill, vid, markers.count(vid))
			}
			time.Sleep(10 * time.Millisecond)
		}
		failover := time.Since(killed)
		procs[slot], ids[slot] = start(slot)
		ready := time.Since(killed)
		failovers, readies = append(failovers, failover), append(readies, ready)
		t.Logf("kill %d at %s: node %s (reading %d partitions; %d of %d published, %d outputs) killed; its partitions taken over after %s; node %s ready after %s",
			kill, killed.Sub(t0).Round(time.Millisecond), vid, held, published.Load(), plan.incs, seen,
			failover.Round(time.Millisecond), ids[slot], ready.Round(time.Millisecond))
	}
	if hits == 0 {
		t.Fatal("no killed node read a partition: the test proves nothing")
	}
	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Logf("%d kills; failover (kill to all its partitions taken over) %s; kill to replacement ready %s; publishing took until %s",
		len(failovers), spread(failovers), spread(readies), time.Since(t0).Round(time.Millisecond))

	waitExact(t, ctx, bucket, counters, want, 3*time.Minute)
	t.Logf("all %d counters exact (%d increments) %s after start", len(counters), plan.incs, time.Since(t0).Round(time.Millisecond))
	checkOutboxes(t, ctx, js, stream, counters, want)
	checkNoDeadLetters(t, ctx, js)
	for i, p := range procs {
		if !p.Running() {
			t.Errorf("node %s exited by itself: %v", ids[i], p.Err())
			continue
		}
		logPlacementMetrics(t, p)
	}
}

// TestChaosNATSRestart runs the NATS server in a process of its own with 2
// ea-node processes connected to it and, under load, stops it with SIGTERM
// and starts it again on the same store, then does the same with SIGKILL:
// the nodes reconnect and finish with every count exact.
func TestChaosNATSRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	plan := chaosPlan{counters: 100, incs: 10_000, batch: 100, pace: 100 * time.Millisecond,
		every: 3 * time.Second, faults: 2, timeout: 4 * time.Minute}
	if raceEnabled {
		plan.incs = 3_000
	}
	if longChaos() {
		plan.incs, plan.faults, plan.timeout = 100_000, 12, 20*time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), plan.timeout)
	defer cancel()
	t0 := time.Now()

	addr, store := proctest.FreeAddr(t), t.TempDir()
	url := "nats://" + addr
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	serverGen := 0
	startServer := func() *process {
		serverGen++
		name := fmt.Sprintf("nats-server-%d", serverGen)
		if bin := os.Getenv(bustest.ServerEnv); bin != "" {
			// The nats-server binary make test builds, as deployed.
			host, port, _ := net.SplitHostPort(addr)
			monitor := proctest.FreeAddr(t)
			_, mport, _ := net.SplitHostPort(monitor)
			p := startProcess(t, name, "", bin, nil, "-a", host, "-p", port, "-js", "-sd", store, "-n", "chaos-nats", "-m", mport)
			p.WaitHTTP(t, 60*time.Second, "http://"+monitor+"/healthz")
			return p
		}
		p := startProcess(t, name, "", self,
			[]string{envServeNATS + "=" + addr, envNATSStore + "=" + store}, "-test.run=^$")
		p.WaitOutput(t, 60*time.Second, "nats-server ready")
		return p
	}
	server := startServer()

	const nodes = 2
	procs := make([]*process, nodes)
	for i := range procs {
		metrics := proctest.FreeAddr(t)
		id := fmt.Sprint("n", i)
		procs[i] = startNode(t, id, metrics, append([]string{"--nats", url, "--metrics", metrics, "--node-id", id}, chaosNodeArgs...)...)
		procs[i].waitReady(t, 60*time.Second)
	}
	nc, js := plainClient(t, url)
	counters, want := chaosCounters(t, nc, plan)
	stream, bucket := outboxAndState(t, ctx, js)

	var published atomic.Int64
	pubDone := make(chan error, 1)
	go func() { pubDone <- publishPaced(ctx, js, counters, plan, &published) }()

	var outages, recoveries []time.Duration
	next := time.Now().Add(plan.every / 2)
	for fault := 1; ; fault++ {
		if fault > plan.faults && published.Load() == int64(plan.incs) {
			break
		}
		if !sleepUntil(ctx, next) {
			t.Fatalf("test timed out after %d server restarts", fault-1)
		}
		sig := syscall.SIGTERM
		if fault%2 == 0 {
			sig = syscall.SIGKILL
		}
		seen := countOutputs(ctx, stream)
		if err := server.Signal(sig); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		if code := server.Wait(t, 30*time.Second); sig == syscall.SIGTERM && code != 0 {
			t.Fatalf("%s: exit status %d after SIGTERM, want 0\n%s", server.Name, code, server.Stderr)
		}
		server = startServer()
		outage := time.Since(stopped)
		// Recovery: the nodes are ready again and records flow: outputs
		// grow past what they were before the stop.
		for i, p := range procs {
			eventually(t, 60*time.Second, fmt.Sprintf("node n%d ready again after the server restart", i), func() bool {
				if !p.Running() {
					t.Fatalf("node n%d exited: %v", i, p.Err())
				}
				code, _ := proctest.Get("http://" + p.metrics + "/readyz")
				return code == http.StatusOK
			})
		}
		pending := published.Load() > int64(seen)
		eventually(t, 60*time.Second, "outputs to grow after the server restart", func() bool {
			return !pending || countOutputs(ctx, stream) > seen
		})
		recovery := time.Since(stopped) - outage
		outages, recoveries = append(outages, outage), append(recoveries, recovery)
		t.Logf("restart %d at %s: %s to the server (%d of %d published, %d outputs); back after %s; nodes ready and records flowing %s later",
			fault, stopped.Sub(t0).Round(time.Millisecond), sig, published.Load(), plan.incs, seen,
			outage.Round(time.Millisecond), recovery.Round(time.Millisecond))
		next = time.Now().Add(plan.every)
	}
	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Logf("%d server restarts; stop to server back %s; server back to nodes ready and records flowing %s",
		len(outages), spread(outages), spread(recoveries))

	waitExact(t, ctx, bucket, counters, want, 3*time.Minute)
	t.Logf("all %d counters exact (%d increments) %s after start", len(counters), plan.incs, time.Since(t0).Round(time.Millisecond))
	checkOutboxes(t, ctx, js, stream, counters, want)
	checkNoDeadLetters(t, ctx, js)
	for i, p := range procs {
		if !p.Running() {
			t.Errorf("node n%d exited: %v", i, p.Err())
			continue
		}
		logPlacementMetrics(t, p)
		logRuntimeMetrics(t, p)
	}
}

// plainClient connects with nats.go alone, reconnecting for as long as it
// takes; the JetStream context gives up on an asynchronous publish after 5s
// (then publishPaced publishes it again).
func plainClient(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// chaosCounters creates plan.counters counters and returns their ids and the
// count each must reach.
func chaosCounters(t testing.TB, nc *nats.Conn, plan chaosPlan) ([]string, map[string]int64) {
	t.Helper()
	ids := make([]string, plan.counters)
	for i := range ids {
		ids[i] = fmt.Sprint("c", i)
		createEffector(t, nc, "ea", "counter", ids[i])
	}
	want := make(map[string]int64, len(ids))
	for i := range plan.incs {
		want[ids[i%len(ids)]]++
	}
	return ids, want
}

func outboxAndState(t testing.TB, ctx context.Context, js jetstream.JetStream) (jetstream.Stream, jetstream.KeyValue) {
	t.Helper()
	stream, err := js.Stream(ctx, "EA_OUT")
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := js.KeyValue(ctx, "ea_state")
	if err != nil {
		t.Fatal(err)
	}
	return stream, bucket
}

// sleepUntil waits until at, reporting false if ctx ends first.
func sleepUntil(ctx context.Context, at time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(at)):
		return true
	}
}

// publishPaced publishes plan.incs incs round-robin to ids, plan.batch at a
// time, each batch acknowledged by the stream before the next, plan.pace
// apart; a record whose publish failed or went unanswered is published again
// until the stream acknowledges it (its Nats-Msg-Id makes a second copy a
// duplicate the stream drops).
func publishPaced(ctx context.Context, js jetstream.JetStream, ids []string, plan chaosPlan, published *atomic.Int64) error {
	for first := 0; first < plan.incs; first += plan.batch {
		var futures []jetstream.PubAckFuture
		n := 0
		for i := first; i < min(first+plan.batch, plan.incs); i++ {
			msg := incMsg(ids[i%len(ids)], i)
			f, err := js.PublishMsgAsync(msg)
			if err != nil { // e.g. disconnected
				if err := publishUntilAcked(ctx, js, msg); err != nil {
					return err
				}
				n++
				continue
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case <-f.Err():
				if err := publishUntilAcked(ctx, js, f.Msg()); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			n++
		}
		published.Add(int64(n))
		if !sleepUntil(ctx, time.Now().Add(plan.pace)) {
			return ctx.Err()
		}
	}
	return nil
}

func publishUntilAcked(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) error {
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			return nil
		}
		if !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return fmt.Errorf("publish %s: gave up after %d attempts: %w", msg.Header.Get("Nats-Msg-Id"), attempt, err)
		}
	}
}

// countOutputs counts the records on the counters' outboxes, -1 if the server
// cannot tell now.
func countOutputs(ctx context.Context, stream jetstream.Stream) int {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := stream.Info(ictx, jetstream.WithSubjectFilter("ea.out.counter.>"))
	if err != nil {
		return -1
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// waitExact waits until every counter's state holds exactly its count,
// failing at once if one counts more (a record applied twice) and after
// timeout naming the counters still short.
func waitExact(t testing.TB, ctx context.Context, bucket jetstream.KeyValue, ids []string, want map[string]int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var short []string
		var lastErr error
		missing := int64(0)
		for _, id := range ids {
			d, err := proctest.ReadState(ctx, bucket, "counter."+id)
			if err != nil {
				lastErr = fmt.Errorf("state of counter/%s: %w", id, err)
				short = append(short, id+" unreadable")
				continue
			}
			switch c := d.Count(); {
			case c > want[id]:
				t.Fatalf("counter/%s counted %d, more than the %d increments sent to it: a record was applied twice", id, c, want[id])
			case c < want[id]:
				short = append(short, fmt.Sprintf("%s at %d of %d", id, c, want[id]))
				missing += want[id] - c
			}
		}
		if len(short) == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("after %s, %d counters are short of their count by %d increments in all (last error: %v): %s",
				timeout, len(short), missing, lastErr, strings.Join(short, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// markerWatch follows the partition leases part.<kind>.<partition> in the
// placement bucket: which node reads which partition.
type markerWatch struct {
	mu     sync.Mutex
	driver map[string]string // lease key -> node id
}

// watchMarkers follows the partition leases until the test ends.
func watchMarkers(t testing.TB, ctx context.Context, js jetstream.JetStream) *markerWatch {
	t.Helper()
	place, err := js.KeyValue(ctx, "ea_place")
	if err != nil {
		t.Fatal(err)
	}
	w, err := place.Watch(ctx, "part.>")
	if err != nil {
		t.Fatal(err)
	}
	m := &markerWatch{driver: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil {
				continue // the end of the initial values
			}
			var doc struct {
				Node string `msgpack:"node"`
			}
			m.mu.Lock()
			if e.Operation() == jetstream.KeyValuePut && msgpack.Unmarshal(e.Value(), &doc) == nil {
				m.driver[e.Key()] = doc.Node
			} else {
				delete(m.driver, e.Key())
			}
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		// The watch ends with ctx, usually before the test's cleanup: then
		// Stop finds its subscription gone.
		if err := w.Stop(); err != nil && !errors.Is(err, nats.ErrBadSubscription) && !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("stop the lease watch: %v", err)
		}
		<-done
	})
	return m
}

// count is how many partitions node reads by the leases.
func (m *markerWatch) count(node string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, d := range m.driver {
		if d == node {
			n++
		}
	}
	return n
}

// spread summarises durations: min, median, max.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "(none)"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %s, median %s, max %s (n=%d)", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]), len(s))
}

// logPlacementMetrics logs a node's placement metrics.
func logPlacementMetrics(t testing.TB, p *process) {
	t.Helper()
	_, body := proctest.Get("http://" + p.metrics + "/metrics")
	var lines []string
	for line := range strings.Lines(body) {
		for _, name := range []string{"ea_effectors_active", "ea_activations_total", "ea_passivations_total", "ea_handovers_total", "ea_nodes_live"} {
			if strings.HasPrefix(line, name) {
				lines = append(lines, "  "+strings.TrimSpace(line))
			}
		}
	}
	t.Logf("%s placement metrics:\n%s", p.Name, strings.Join(lines, "\n"))
}
