package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Env is where scenarios run: the scale binary (its server and node
// subcommands become the child processes), a directory for the server's
// store, and where the children's logs and the report go.
type Env struct {
	Bin string
	Dir string
	Log io.Writer
	Out io.Writer
	// NodeArgs are passed to every node.
	NodeArgs []string
	// NodePprof, host:port, makes node n<i> serve net/http/pprof on port
	// port+i-1.
	NodePprof string
	// ServerArgs are passed to the server (e.g. -pprof addr).
	ServerArgs []string
	// ChildEnv is added to the children's environment.
	ChildEnv []string
	// NodeEnv is added to the nodes' environment (e.g. GOMEMLIMIT=150MiB).
	NodeEnv []string
}

func (e Env) validate() error {
	if e.Bin == "" || e.Dir == "" || e.Log == nil || e.Out == nil {
		return fmt.Errorf("%w: Env needs Bin, Dir, Log and Out", ErrInvalid)
	}
	return nil
}

func (e Env) printf(format string, args ...any) {
	fmt.Fprintf(e.Out, format+"\n", args...)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// startServer starts a NATS server process storing under dir and connects
// a provisioned driver connection to it.
func startServer(ctx context.Context, env Env, dir string) (*Proc, *bus.Conn, error) {
	srv, err := Start("nats-server", env.Log, env.ChildEnv, env.Bin, append([]string{"server", "-store", dir}, env.ServerArgs...)...)
	if err != nil {
		return nil, nil, err
	}
	url, err := srv.WaitLine(ctx, "URL ")
	if err != nil {
		_ = srv.Kill()
		return nil, nil, err
	}
	conn, err := bus.Connect(ctx, bus.Config{URL: url, Name: "scale-driver"})
	if err == nil {
		err = conn.Provision(ctx)
	}
	if err != nil {
		_ = srv.Kill()
		return nil, nil, fmt.Errorf("driver connection: %w", err)
	}
	return srv, conn, nil
}

// startNode starts a node process hosting the counter kind and waits until it
// is ready; it returns how long that took.
func startNode(ctx context.Context, env Env, url, id string, args ...string) (*Proc, time.Duration, error) {
	all := append([]string{"node", "-url", url, "-id", id}, env.NodeArgs...)
	if env.NodePprof != "" {
		host, port, err := net.SplitHostPort(env.NodePprof)
		p, perr := strconv.Atoi(port)
		i, ierr := strconv.Atoi(strings.TrimPrefix(id, "n"))
		if err != nil || perr != nil || ierr != nil {
			return nil, 0, fmt.Errorf("%w: NodePprof %q for node %s: want host:port and nodes n<i>", ErrInvalid, env.NodePprof, id)
		}
		all = append(all, "-pprof", net.JoinHostPort(host, strconv.Itoa(p+i-1)))
	}
	all = append(all, args...)
	t0 := time.Now()
	p, err := Start("node "+id, env.Log, append(slices.Clone(env.ChildEnv), env.NodeEnv...), env.Bin, all...)
	if err != nil {
		return nil, 0, err
	}
	if _, err := p.WaitLine(ctx, "READY"); err != nil {
		_ = p.Kill()
		return nil, 0, err
	}
	return p, time.Since(t0), nil
}

// rss reports the RSS of each process.
func rss(env Env, what string, procs ...*Proc) {
	var parts []string
	for _, p := range procs {
		r, _, err := p.RSS()
		if err != nil {
			parts = append(parts, p.Name+" "+err.Error())
			continue
		}
		parts = append(parts, p.Name+" "+mib(r))
	}
	env.printf("  RSS %s: %s", what, strings.Join(parts, ", "))
}

// throughput publishes total records round-robin to refs (already active)
// while the node processes them and returns the steady rate: the outputs
// after the first tenth over the time they took.
func throughput(ctx context.Context, env Env, conn *bus.Conn, outs *Outputs, refs []records.Ref, total int, procs ...*Proc) (float64, error) {
	base := outs.Total()
	outs.MarkAt(base + int64(total/10))
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.PID())
	}
	if _, _, err := indexed(ctx, conn); err != nil { // the indexer's work of what came before is not this run's
		return 0, err
	}
	s := Sample(100*time.Millisecond, pids...)
	cpu0 := cpuTimes(procs)
	t0 := time.Now()
	if err := Publish(ctx, conn, refs, total, 4096); err != nil {
		s.Stop()
		return 0, err
	}
	published := time.Since(t0)
	err := outs.WaitTotal(ctx, base+int64(total))
	end := time.Now()
	peaks := s.Stop()
	if err != nil {
		return 0, err
	}
	// CPU is read once the record store's indexer (when the node runs
	// one) has indexed this run's records too: its work is part of the hop.
	caughtUp, indexing, err := indexed(ctx, conn)
	if err != nil {
		return 0, err
	}
	cpu1 := cpuTimes(procs)
	rate := float64(total-total/10) / end.Sub(outs.MarkedAt()).Seconds()
	var parts []string
	for _, p := range procs {
		parts = append(parts, p.Name+" "+mib(peaks[p.PID()]))
	}
	env.printf("  throughput over %d effectors: %d records in %.2fs (published in %.2fs): %.0f records/s steady (last nine tenths), %.0f records/s overall; outputs published again by node retries so far: %d",
		len(refs), total, end.Sub(t0).Seconds(), published.Seconds(), rate, float64(total)/end.Sub(t0).Seconds(), outs.Duplicates())
	env.printf("  RSS peak under load (sampled every 100ms): %s", strings.Join(parts, ", "))
	parts = parts[:0]
	for i, p := range procs {
		if cpu0[i] >= 0 && cpu1[i] >= 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", p.Name, float64((cpu1[i]-cpu0[i]).Microseconds())/float64(total)))
		}
	}
	what := "publish to last output"
	if indexing {
		what = fmt.Sprintf("publish to last output and its index entries, %.2fs after it", caughtUp.Seconds())
	}
	env.printf("  CPU per record, µs (user+system, %s; steadier than the rate on a shared machine): %s", what, strings.Join(parts, ", "))
	return rate, nil
}

// indexed waits until the record store's indexer (consumer store.IndexerName
// on the mailbox and outbox streams) has indexed every record, and returns
// how long that took; ok is false, at once, when no indexer runs. It gives
// up after indexWait.
func indexed(ctx context.Context, conn *bus.Conn) (took time.Duration, ok bool, err error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, indexWait)
	defer cancel()
	for {
		var lag uint64
		for _, get := range []func(context.Context) (jetstream.Stream, error){conn.MailboxStream, conn.OutboxStream} {
			st, err := get(ctx)
			if err != nil {
				return 0, false, err
			}
			cons, err := st.Consumer(ctx, store.IndexerName)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				return 0, false, nil
			}
			if err != nil {
				return 0, false, fmt.Errorf("the record store's indexer: %w", err)
			}
			info := cons.CachedInfo()
			lag += info.NumPending + uint64(info.NumAckPending)
		}
		if lag == 0 {
			return time.Since(t0), true, nil
		}
		select {
		case <-ctx.Done():
			return 0, true, fmt.Errorf("the record store's indexer has %d records left to index after %s: %w", lag, time.Since(t0).Round(time.Second), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// indexWait bounds the wait for the record store's indexer to catch up.
const indexWait = 5 * time.Minute

// cpuTimes reads the CPU time of each process, -1 where it cannot.
func cpuTimes(procs []*Proc) []time.Duration {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		d, err := p.CPU()
		if err != nil {
			d = -1
		}
		out[i] = d
	}
	return out
}

// activate sends one record to each of refs and waits for all their outputs.
func activate(ctx context.Context, conn *bus.Conn, outs *Outputs, refs []records.Ref) (time.Duration, error) {
	base := outs.Total()
	t0 := time.Now()
	if err := Publish(ctx, conn, refs, len(refs), 4096); err != nil {
		return 0, err
	}
	if err := outs.WaitTotal(ctx, base+int64(len(refs))); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func consumers(ctx context.Context, conn *bus.Conn) int {
	st, err := conn.MailboxStream(ctx)
	if err != nil {
		return -1
	}
	info, err := st.Info(ctx)
	if err != nil {
		return -1
	}
	return info.State.Consumers
}

// ActiveConfig sizes the Active scenario.
type ActiveConfig struct {
	// Effectors is how many effectors become active (10,000).
	Effectors int
	// Small is the smaller population throughput is compared with (100).
	Small int
	// Records is how many records each throughput run publishes.
	Records int
	// Samples is how many passive effectors the activation latency is
	// measured on at the end (0: none).
	Samples int
	// Settle is how long the node is left idle before idle RSS is read.
	Settle time.Duration
	// Batch is the counter kind's MaxBatch on the node (0: the kind's
	// default); 1 applies one record per state write.
	Batch int
}

// Active runs scenarios 1, 3 and 4: a server and one node process; Small
// effectors are activated and loaded, then all Effectors are activated and
// loaded with the same number of records; RSS of both processes at each step.
func Active(ctx context.Context, env Env, cfg ActiveConfig) error {
	if err := env.validate(); err != nil {
		return err
	}
	if cfg.Effectors < 1 || cfg.Small < 1 || cfg.Small > cfg.Effectors || cfg.Records < cfg.Effectors || cfg.Samples < 0 {
		return fmt.Errorf("%w: ActiveConfig %+v: need 1 <= Small <= Effectors <= Records, Samples >= 0", ErrInvalid, cfg)
	}
	env.printf("## active: %d active effectors on one node (throughput against %d), %d records per run", cfg.Effectors, cfg.Small, cfg.Records)
	srv, conn, err := startServer(ctx, env, filepath.Join(env.Dir, "active"))
	if err != nil {
		return err
	}
	defer func() { _ = srv.Kill() }() // a throw-away store: no need to wait for a graceful stop
	defer func() { _ = conn.Close() }()
	refs := Counters("c", cfg.Effectors+cfg.Samples)
	t0 := time.Now()
	if err := CreateDocs(ctx, conn, refs, 4096); err != nil {
		return err
	}
	env.printf("  created %d state documents in %.2fs", len(refs), time.Since(t0).Seconds())
	outs, err := WatchOutputs(conn)
	if err != nil {
		return err
	}
	defer func() { _ = outs.Close() }()

	node, ready, err := startNode(ctx, env, conn.ClientURL(), "n1", "-idle", "1h", "-batch", strconv.Itoa(cfg.Batch))
	if err != nil {
		return err
	}
	defer func() { _ = node.Kill() }() // a throw-away store: no need to wait for a graceful stop
	env.printf("  node ready in %.2fs (process start to Ready)", ready.Seconds())
	rss(env, "node started, nothing active", node, srv)

	small, all := refs[:cfg.Small], refs[:cfg.Effectors]
	took, err := activate(ctx, conn, outs, small)
	if err != nil {
		return err
	}
	env.printf("  activated %d effectors in %.2fs (one record each, publish to last output)", len(small), took.Seconds())
	rateSmall, err := throughput(ctx, env, conn, outs, small, cfg.Records, node, srv)
	if err != nil {
		return err
	}
	took, err = activate(ctx, conn, outs, all[cfg.Small:])
	if err != nil {
		return err
	}
	env.printf("  activated %d more effectors in %.2fs (%.0f activations/s); consumers on the server: %d",
		cfg.Effectors-cfg.Small, took.Seconds(), float64(cfg.Effectors-cfg.Small)/took.Seconds(), consumers(ctx, conn))
	sleep(ctx, cfg.Settle)
	rss(env, fmt.Sprintf("%d active, idle for %s", cfg.Effectors, cfg.Settle), node, srv)
	rateAll, err := throughput(ctx, env, conn, outs, all, cfg.Records, node, srv)
	if err != nil {
		return err
	}
	env.printf("  throughput %d / %d effectors: %.2f", cfg.Effectors, cfg.Small, rateAll/rateSmall)
	sleep(ctx, cfg.Settle)
	rss(env, fmt.Sprintf("%d active, idle %s after the load", cfg.Effectors, cfg.Settle), node, srv)
	if took, ok, err := indexed(ctx, conn); err != nil {
		return err
	} else if ok {
		env.printf("  the record store's index caught up %.2fs after that", took.Seconds())
		sleep(ctx, cfg.Settle)
		rss(env, fmt.Sprintf("%d active, %s after the index caught up", cfg.Effectors, cfg.Settle), node, srv)
	}
	if cfg.Samples > 0 {
		if err := Latency(ctx, env, conn, refs[cfg.Effectors:]); err != nil {
			return err
		}
		rss(env, "after the latency samples", node, srv)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Latency measures, one at a time, the time from publishing the first record
// to each passive effector of refs to its output being seen.
func Latency(ctx context.Context, env Env, conn *bus.Conn, refs []records.Ref) error {
	if len(refs) == 0 {
		return fmt.Errorf("%w: Latency: no effectors", ErrInvalid)
	}
	ch := make(chan string, 1024)
	sub, err := conn.NATS().Subscribe(conn.Names().Outboxes(), func(m *nats.Msg) {
		select {
		case ch <- m.Subject:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to outputs: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := conn.NATS().Flush(); err != nil {
		return err
	}
	names := conn.Names()
	lat := make([]time.Duration, 0, len(refs))
	for _, r := range refs {
		rec, err := records.New("inc", nil)
		if err != nil {
			return err
		}
		want := names.Outbox(r)
		t0 := time.Now()
		if _, err := conn.JetStream().PublishMsg(ctx, rec.Msg(names.Mailbox(r))); err != nil {
			return fmt.Errorf("publish to %s: %w", r, err)
		}
		wait := time.NewTimer(10 * time.Second)
	loop:
		for {
			select {
			case s := <-ch:
				if s == want {
					break loop
				}
			case <-wait.C:
				return fmt.Errorf("no output of passive effector %s within 10s", r)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		wait.Stop()
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	q := func(p float64) string {
		return fmt.Sprintf("%.1fms", float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds())/1000)
	}
	env.printf("  activation latency (first record to a passive effector, publish to output seen), %d samples: p50 %s p90 %s p99 %s max %s",
		len(lat), q(0.5), q(0.9), q(0.99), q(1))
	return nil
}

// MillionConfig sizes the Million scenario.
type MillionConfig struct {
	// Effectors is how many state documents are created (1,000,000).
	Effectors int
	// Window is how many document writes are in flight.
	Window int
	// Samples is how many passive effectors the activation latency is
	// measured on (1,000).
	Samples int
	// Bulk is how many further random effectors are activated at once.
	Bulk int
}

// Million runs scenario 2 (and 4): Effectors state documents written into the
// state bucket, server RSS and disk, a node starting with all of them
// passive, the activation latency on Samples of them and a bulk activation.
func Million(ctx context.Context, env Env, cfg MillionConfig) error {
	if err := env.validate(); err != nil {
		return err
	}
	if cfg.Effectors < 1 || cfg.Window < 1 || cfg.Samples < 0 || cfg.Bulk < 0 || cfg.Samples+cfg.Bulk > cfg.Effectors {
		return fmt.Errorf("%w: MillionConfig %+v", ErrInvalid, cfg)
	}
	env.printf("## million: %d effectors with state documents, passive", cfg.Effectors)
	dir := filepath.Join(env.Dir, "million")
	srv, conn, err := startServer(ctx, env, dir)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Kill() }() // a throw-away store: no need to wait for a graceful stop
	defer func() { _ = conn.Close() }()
	rss(env, "empty server", srv)
	refs := Counters("m", cfg.Effectors)
	t0 := time.Now()
	if err := CreateDocs(ctx, conn, refs, cfg.Window); err != nil {
		return err
	}
	took := time.Since(t0)
	env.printf("  created %d state documents in %.1fs (%.0f/s, %d in flight)", len(refs), took.Seconds(), float64(len(refs))/took.Seconds(), cfg.Window)
	rss(env, "after creating them", srv)
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		return err
	}
	st, err := bucket.Status(ctx)
	if err != nil {
		return err
	}
	du, err := DiskUsage(dir)
	if err != nil {
		return err
	}
	env.printf("  state bucket: %d values, %s of stream data; store directory on disk: %s", st.Values(), mib(int64(st.Bytes())), mib(du))
	node, ready, err := startNode(ctx, env, conn.ClientURL(), "n1", "-idle", "1h")
	if err != nil {
		return err
	}
	defer func() { _ = node.Kill() }() // a throw-away store: no need to wait for a graceful stop
	env.printf("  node ready in %.2fs with %d passive effectors", ready.Seconds(), cfg.Effectors)
	rss(env, "node started", node, srv)
	perm := rand.Perm(cfg.Effectors)
	sample := make([]records.Ref, 0, cfg.Samples+cfg.Bulk)
	for _, i := range perm[:cfg.Samples+cfg.Bulk] {
		sample = append(sample, refs[i])
	}
	if cfg.Samples > 0 {
		if err := Latency(ctx, env, conn, sample[:cfg.Samples]); err != nil {
			return err
		}
	}
	if cfg.Bulk > 0 {
		outs, err := WatchOutputs(conn)
		if err != nil {
			return err
		}
		defer func() { _ = outs.Close() }()
		took, err := activate(ctx, conn, outs, sample[cfg.Samples:])
		if err != nil {
			return err
		}
		env.printf("  activated %d random passive effectors at once in %.2fs (%.0f/s)", cfg.Bulk, took.Seconds(), float64(cfg.Bulk)/took.Seconds())
	}
	rss(env, fmt.Sprintf("%d active of %d", cfg.Samples+cfg.Bulk, cfg.Effectors), node, srv)
	return nil
}

// FailoverConfig sizes the Failover scenario.
type FailoverConfig struct {
	// Effectors is how many effectors are active across the nodes.
	Effectors int
	// Nodes is how many node processes run (3).
	Nodes int
	// NodeArgs are extra node flags (default settings: none).
	NodeArgs []string
}

// Failover runs scenario 5: Nodes node processes drive Effectors active
// effectors; one is killed with SIGKILL, a record is sent at once to every
// effector it drove, and the time until each of them emitted its output is
// measured. The spread of partitions (leases) and effectors over the nodes
// is read from outside before the kill, after the failover, and once the
// killed node has started again under its name (with the lease of every
// partition where it was before the kill, or after 30 s).
func Failover(ctx context.Context, env Env, cfg FailoverConfig) error {
	if err := env.validate(); err != nil {
		return err
	}
	if cfg.Effectors < 1 || cfg.Nodes < 2 {
		return fmt.Errorf("%w: FailoverConfig %+v: need Effectors >= 1, Nodes >= 2", ErrInvalid, cfg)
	}
	env.printf("## failover: %d nodes, %d active effectors, SIGKILL one (node flags %q)", cfg.Nodes, cfg.Effectors, cfg.NodeArgs)
	srv, conn, err := startServer(ctx, env, filepath.Join(env.Dir, "failover"))
	if err != nil {
		return err
	}
	defer func() { _ = srv.Kill() }() // a throw-away store: no need to wait for a graceful stop
	defer func() { _ = conn.Close() }()
	refs := Counters("f", cfg.Effectors)
	if err := CreateDocs(ctx, conn, refs, 4096); err != nil {
		return err
	}
	outs, err := WatchOutputs(conn)
	if err != nil {
		return err
	}
	defer func() { _ = outs.Close() }()
	nodes := map[string]*Proc{}
	for i := range cfg.Nodes {
		id := "n" + strconv.Itoa(i+1)
		args := append([]string{"-idle", "1h"}, cfg.NodeArgs...)
		p, _, err := startNode(ctx, env, conn.ClientURL(), id, args...)
		if err != nil {
			return err
		}
		defer func() { _ = p.Kill() }() // a throw-away store: no need to wait for a graceful stop
		nodes[id] = p
	}
	if _, err := activate(ctx, conn, outs, refs); err != nil {
		return err
	}
	drivers, err := settledMarkers(ctx, conn, refs)
	if err != nil {
		return err
	}
	per := map[string]int{}
	var victims []records.Ref
	for _, r := range refs {
		per[drivers[r.ID]]++
		if drivers[r.ID] == "n1" {
			victims = append(victims, r)
		}
	}
	leasesBefore, err := readLeases(ctx, conn)
	if err != nil {
		return err
	}
	env.printf("  partitions per node: %s; effectors per node: %s", spreadLine(perNodeCounts(leasesBefore), cfg.Nodes), spreadLine(per, cfg.Nodes))
	if len(victims) == 0 {
		return fmt.Errorf("node n1 reads the partition of no effector; leases: %d", len(drivers))
	}
	if err := nodes["n1"].Kill(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := Publish(ctx, conn, victims, len(victims), 4096); err != nil {
		return err
	}
	published := time.Since(t0)
	deadline := time.Now().Add(60 * time.Second)
	var times []time.Duration
	for {
		times = times[:0]
		for _, r := range victims {
			n, at := outs.Of(r)
			if n >= 2 {
				times = append(times, at.Sub(t0))
			}
		}
		if len(times) == len(victims) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 60s only %d of %d effectors of the killed node processed a record", len(times), len(victims))
		}
		sleep(ctx, 10*time.Millisecond)
	}
	slices.Sort(times)
	env.printf("  killed n1 (%d effectors); records to them published in %.2fs; time from the kill to each effector's output: first %.2fs p50 %.2fs p99 %.2fs last %.2fs",
		len(victims), published.Seconds(), times[0].Seconds(), times[len(times)/2].Seconds(), times[len(times)*99/100].Seconds(), times[len(times)-1].Seconds())
	after, err := markers(ctx, conn, refs)
	if err != nil {
		return err
	}
	moved := map[string]int{}
	for _, r := range victims {
		moved[after[r.ID]]++
	}
	env.printf("  the killed node's effectors are now driven by: %v", moved)
	leasesAfter, err := readLeases(ctx, conn)
	if err != nil {
		return err
	}
	env.printf("  after the failover: partitions per node: %s; effectors per node: %s",
		spreadLine(perNodeCounts(leasesAfter), cfg.Nodes-1), spreadLine(perNodeCounts(after), cfg.Nodes-1))

	// n1 comes back under its name: the spread is that of before the kill.
	args := append([]string{"-idle", "1h"}, cfg.NodeArgs...)
	p, _, err := startNode(ctx, env, conn.ClientURL(), "n1", args...)
	if err != nil {
		return err
	}
	defer func() { _ = p.Kill() }()
	var back map[string]string
	for start := time.Now(); ; {
		if back, err = readLeases(ctx, conn); err != nil {
			return err
		}
		if maps.Equal(back, leasesBefore) || time.Since(start) > 30*time.Second {
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	rejoined, err := markers(ctx, conn, refs)
	if err != nil {
		return err
	}
	env.printf("  n1 back: partitions per node: %s; effectors per node: %s; every lease where it was before the kill: %v",
		spreadLine(perNodeCounts(back), cfg.Nodes), spreadLine(perNodeCounts(rejoined), cfg.Nodes), maps.Equal(back, leasesBefore))
	return nil
}

// settledMarkers polls the partition leases until the partitions of all
// refs have one and nothing changed for 100ms; it returns effector id → the
// node reading its partition.
func settledMarkers(ctx context.Context, conn *bus.Conn, refs []records.Ref) (map[string]string, error) {
	prev, err := markers(ctx, conn, refs)
	for err == nil {
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var cur map[string]string
		if cur, err = markers(ctx, conn, refs); err == nil && len(cur) == len(refs) && maps.Equal(prev, cur) {
			return cur, nil
		}
		prev = cur
	}
	return nil, err
}

// markers reads the partition leases (part.<kind>.<partition> → node) and
// returns effector id → the node reading the partition of each of refs.
func markers(ctx context.Context, conn *bus.Conn, refs []records.Ref) (map[string]string, error) {
	leases, err := readLeases(ctx, conn)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range refs {
		key := conn.Names().LeaseKey(r.Kind, conn.Names().Partition(r))
		if node, ok := leases[key]; ok {
			out[r.ID] = node
		}
	}
	return out, nil
}

// readLeases reads the partition leases: lease key → node.
func readLeases(ctx context.Context, conn *bus.Conn) (map[string]string, error) {
	kv, err := conn.JetStream().KeyValue(ctx, conn.Names().PlaceBucket())
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchFiltered(ctx, []string{conn.Names().LeaseKeys()}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	leases := map[string]string{}
	for e := range w.Updates() {
		if e == nil {
			return leases, nil
		}
		var doc struct {
			Node string `json:"node"`
		}
		if err := codec.Unmarshal(e.Value(), &doc); err != nil {
			return nil, fmt.Errorf("lease %s: %w", e.Key(), err)
		}
		leases[e.Key()] = doc.Node
	}
	return nil, fmt.Errorf("leases: watch closed")
}

// spreadLine describes how counts (node → partitions or effectors) spread
// over the nodes live: the counts and the busiest node's share against a
// fair one (total / live nodes).
func spreadLine(counts map[string]int, live int) string {
	total, busiest := 0, 0
	for _, n := range counts {
		total += n
		busiest = max(busiest, n)
	}
	if total == 0 || live == 0 {
		return fmt.Sprint(counts)
	}
	return fmt.Sprintf("%v (busiest %.2f× fair)", counts, float64(busiest)*float64(live)/float64(total))
}

// perNodeCounts counts the values of m (effector or lease → node) by node.
func perNodeCounts(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, node := range m {
		out[node]++
	}
	return out
}
