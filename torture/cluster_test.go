//go:build unix

package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The cluster run's faults: the cluster's own routine events, which must
// not count as node failures (DESIGN.md section 6).
const (
	faultKillLease = "kill-lease-leader" // kill -9 of the server leading the lease bucket; back after the TTL
	faultKillGroup = "kill-group-leader" // kill -9 of a server leading a group's mailbox stream (not the lease bucket); back after the TTL
	faultTermNATS  = "restart-server"    // SIGTERM of one server, started again at once
	faultRolling   = "rolling-restart"   // SIGTERM and start again of each server in turn, each back and current before the next
	faultRollNodes = "rolling-nodes"     // SIGTERM and start again of each node in turn (an upgrade of the nodes), each ready before the next
)

// clusterFaults is one round of the cluster run; clusterMore can be asked
// for by TORTURE_CLUSTER_FAULTS.
var (
	clusterFaults = []string{faultKillLease, faultKillGroup, faultTermNATS, faultRolling}
	clusterMore   = []string{faultRollNodes}
)

// clusterServer is one nats-server process of a 3-server JetStream cluster.
type clusterServer struct {
	name, addr, route, store, conf string
	monitor                        string // host:port of its monitoring endpoints (/jsz)
	proc                           *proctest.Proc
	gen                            int
}

// writeClusterConf writes s's configuration file: JetStream storing in
// s.store, routes to every server, and the mailbox mapping of names (an
// operator's configuration for stream groups, docs/layout.md).
func writeClusterConf(t testing.TB, s *clusterServer, routes []string, names bus.Names) {
	t.Helper()
	host, port, _ := strings.Cut(s.addr, ":")
	rhost, rport, _ := strings.Cut(s.route, ":")
	src, dest := names.MailboxMapping()
	quoted := make([]string, len(routes))
	for i, r := range routes {
		quoted[i] = fmt.Sprintf("%q", r)
	}
	conf := fmt.Sprintf(`server_name: %q
host: %q
port: %s
http: %q
jetstream { store_dir: %q }
cluster {
  name: torture
  host: %q
  port: %s
  routes: [%s]
}
mappings = { %q: %q }
`, s.name, host, port, s.monitor, s.store, rhost, rport, strings.Join(quoted, ", "), src, dest)
	s.conf = filepath.Join(t.TempDir(), s.name+".conf")
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startClusterServer starts s from its configuration file, and waits until
// it says it is ready.
func startClusterServer(t testing.TB, s *clusterServer) {
	t.Helper()
	s.gen++
	args := []string{"-c", s.conf}
	for attempt := 1; ; attempt++ {
		p := proctest.Start(t, fmt.Sprintf("%s-%d", s.name, s.gen), bins.natsServer, args, proctest.Environ())
		deadline := time.Now().Add(30 * time.Second)
		for p.Running() && !strings.Contains(p.Stderr.String(), "Server is ready") {
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready after 30s:\n%s", s.name, proctest.Tail(p.Stderr.String(), 30))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if p.Running() {
			s.proc = p
			return
		}
		if attempt == 20 {
			t.Fatalf("%s exited at start %d times: %v\n%s", s.name, attempt, p.Err(), proctest.Tail(p.Stderr.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTortureCluster runs 3 nodes (--replicas 3 --stream-groups 3
// --partitions 16) and the supervisor on 3 nats-server processes forming a
// JetStream cluster, under load with checked acks, and injects the
// cluster's own routine events, TORTURE_ROUNDS (1) rounds of: kill -9 of the
// server leading the lease bucket, kill -9 of a server leading a group's
// mailbox stream (not the lease bucket), SIGTERM and restart of one server,
// and a rolling SIGTERM restart of the three. For each it measures the
// election (from the fault until the meta leader, every stream the counters
// need and each of their partition consumers answer with a leader again, by
// the JetStream API: account, stream and consumer info) and requires, as DESIGN.md section
// 6 says, that no node lose a lease ("lost the lease" in no node's log) and
// that no counter wait more than 2 s past the election. After the rolling
// restart the nodes must spread the stream leaders again within a minute,
// with no node restarting. At the end it checks the log as TestTorture does,
// and that the nodes' ea_records_processed_total{outcome="ok"} adds up to
// the good inputs. It runs in the long form only (TORTURE=long, or
// TORTURE_CLUSTER=1); TORTURE_CLUSTER_FAULTS (comma-separated) runs only the
// faults named.
func TestTortureCluster(t *testing.T) {
	if os.Getenv("TORTURE") != "long" && os.Getenv("TORTURE_CLUSTER") == "" {
		t.Skip("the cluster run is part of the long form: TORTURE=long or TORTURE_CLUSTER=1")
	}
	rounds := envInt(t, "TORTURE_ROUNDS", 1)
	faults := clusterFaults
	if v := os.Getenv("TORTURE_CLUSTER_FAULTS"); v != "" {
		faults = strings.Split(v, ",")
		for _, f := range faults {
			if !slices.Contains(clusterFaults, f) && !slices.Contains(clusterMore, f) {
				t.Fatalf("TORTURE_CLUSTER_FAULTS: unknown fault %q, want some of %s", f, strings.Join(append(slices.Clone(clusterFaults), clusterMore...), ","))
			}
		}
	}
	p := plan{name: "cluster", nodes: 3, partitions: 16, counters: envInt(t, "TORTURE_COUNTERS", 300), rate: 150,
		badEvery: 97, heartbeat: time.Second, ttl: 3 * time.Second, allow: 2 * time.Second,
		timeout: time.Duration(4+4*rounds) * time.Minute}
	if d, ok := t.Deadline(); ok && time.Until(d) < p.timeout+time.Minute {
		p.timeout = time.Until(d) - time.Minute // inside go test's -timeout, so that cleanup stops every process
	}
	const groups = 3
	names, err := bus.NewNames("ea")
	if err == nil {
		names, err = names.WithPartitions(p.partitions)
	}
	if err == nil {
		names, err = names.WithGroups(groups)
	}
	if err != nil {
		t.Fatal(err)
	}
	lay := layoutOf(names)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	t0 := time.Now()

	servers := make([]*clusterServer, 3)
	var routes, urls []string
	for i := range servers {
		servers[i] = &clusterServer{name: fmt.Sprint("s", i), addr: proctest.FreeAddr(t), route: proctest.FreeAddr(t), monitor: proctest.FreeAddr(t), store: t.TempDir()}
		routes = append(routes, "nats://"+servers[i].route)
		urls = append(urls, "nats://"+servers[i].addr)
	}
	for _, s := range servers {
		writeClusterConf(t, s, routes, names)
		startClusterServer(t, s)
	}
	url := strings.Join(urls, ",")
	nc, err := nats.Connect(url, nats.Name("torture"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 60*time.Second, "the cluster's JetStream to answer", func() bool {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		defer acancel()
		_, err := js.AccountInfo(actx)
		return err == nil
	})

	// One node at a time, each restarted (as an orchestrator would) when it
	// exits before ready: on a cluster just formed, provisioning replicated
	// streams may time out.
	gen := 0
	startNode := func(id string) *member {
		for attempt := 1; ; attempt++ {
			gen++
			metrics := proctest.FreeAddr(t)
			args := []string{"--nats", url, "--replicas", "3", "--stream-groups", fmt.Sprint(groups), "--partitions", fmt.Sprint(p.partitions),
				"--metrics", metrics, "--node-id", id,
				"--heartbeat", p.heartbeat.String(), "--heartbeat-ttl", p.ttl.String(), "--idle", "5s", "--shutdown-grace", "5s"}
			n := &member{Proc: proctest.Start(t, fmt.Sprintf("%s-%d", id, gen), bins.node, args, proctest.Environ("EA_")), id: id, metrics: metrics}
			for n.Running() && !n.ready() {
				time.Sleep(50 * time.Millisecond)
			}
			if n.Running() {
				return n
			}
			t.Logf("%s exited before ready (attempt %d): %v\n%s", id, attempt, n.Err(), proctest.Tail(n.Stderr.String(), 3))
			if attempt == 3 {
				t.Fatalf("%s did not start in %d attempts", id, attempt)
			}
		}
	}
	var nodes []*member
	for i := range p.nodes {
		nodes = append(nodes, startNode(fmt.Sprintf("n%d", i)))
	}
	var retired []*member // nodes stopped by rolling-nodes
	// TORTURE_LOGDIR=dir keeps every node's log there (n0-1.log, …), with
	// the test's start time, to follow an event past the allowance.
	if dir := os.Getenv("TORTURE_LOGDIR"); dir != "" {
		defer func() {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Errorf("TORTURE_LOGDIR: %v", err)
				return
			}
			_ = os.WriteFile(filepath.Join(dir, "start"), []byte(t0.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
			for _, m := range append(slices.Clone(nodes), retired...) {
				if err := os.WriteFile(filepath.Join(dir, m.Name+".log"), []byte(m.Stderr.String()), 0o644); err != nil {
					t.Errorf("TORTURE_LOGDIR: %v", err)
				}
			}
		}()
	}
	// TORTURE_NO_SUPERVISOR=1 leaves the supervisor out. It has no
	// --replicas: it once provisioned with one replica and scaled the
	// nodes' streams and buckets down (see BENCHMARKS.md), which the check
	// below reports; it now keeps what the nodes provisioned.
	procs := nodes
	if os.Getenv("TORTURE_NO_SUPERVISOR") == "" {
		supMetrics := proctest.FreeAddr(t)
		sup := &member{Proc: proctest.Start(t, "supervisor", bins.supervisor,
			[]string{"--nats", url, "--metrics", supMetrics, "--gateway", proctest.FreeAddr(t)}, proctest.Environ("EA_")), id: "supervisor", metrics: supMetrics}
		sup.WaitHTTP(t, 120*time.Second, "http://"+supMetrics+"/readyz")
		procs = append(procs, sup)
	}
	t.Logf("cluster of 3 servers, 3 nodes with --replicas 3 --stream-groups %d --partitions %d and %d supervisor(s) deployed in %s",
		groups, p.partitions, len(procs)-len(nodes), time.Since(t0).Round(time.Millisecond))

	// The streams the counters need: a fault clears when each has a leader
	// (and each partition consumer of the counters and the meta leader,
	// below).
	var needed []string
	needed = append(needed, lay.mailboxes...)
	needed = append(needed, lay.outboxes...)
	for _, b := range lay.buckets {
		needed = append(needed, "KV_"+b)
	}
	needed = append(needed, "EA_DEAD", "KV_ea_place")
	// What the nodes provisioned must still be replicated after the
	// supervisor provisioned too.
	for _, name := range needed {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replica(s) after the supervisor started, want the nodes' 3: a server's death loses it", name, r)
		}
	}
	// And the counters' partition consumers, each with its own leader.
	assets := make([]asset, 0, 1+len(needed)+p.partitions)
	assets = append(assets, asset{}) // the meta leader
	for _, name := range needed {
		assets = append(assets, asset{stream: name})
	}
	for part := range p.partitions {
		assets = append(assets, asset{stream: names.PartitionStream(part), consumer: names.PartitionConsumer("counter", part)})
	}
	healthy := func(what string) {
		for _, name := range needed {
			actortest.Eventually(t, 90*time.Second, name+" to have a leader and every replica current "+what, func() bool {
				return streamHealthy(ctx, js, name)
			})
		}
	}

	counters := createCounters(t, nc, p.counters)
	pub := newPublisher(js, counters, p.rate, p.badEvery)
	monCtx, stopMon := context.WithCancel(ctx)
	mon := startMonitor(monCtx, lay.stateBuckets(t, ctx, js), pub)
	if os.Getenv("TORTURE_DEBUG") != "" {
		mon.logf = func(format string, args ...any) {
			t.Logf("%s "+format, append([]any{time.Since(t0).Round(time.Millisecond)}, args...)...)
		}
	}
	defer func() { stopMon(); <-mon.done }()
	stopPub := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.run(ctx, stopPub) }()
	pubStopped := false
	defer func() {
		if !pubStopped {
			close(stopPub)
			cancel()
			<-pubDone
		}
	}()
	sleep(ctx, 2*time.Second)
	waitRecovered(t, ctx, mon, mon.recoverFrom(), "warm-up", 60*time.Second)
	// Let the nodes' spread settle (provisioning spread the groups' leaders;
	// the lowest node places the lease bucket and the timer stream).
	if took, err := waitSpread(ctx, js, names, 60*time.Second); err != nil {
		t.Fatalf("the leaders did not spread after the start: %v", err)
	} else {
		t.Logf("leaders spread %s after warm-up", took.Round(time.Millisecond))
	}

	leasesLost := func() int {
		n := 0
		for _, m := range append(slices.Clone(nodes), retired...) {
			n += strings.Count(m.Stderr.String(), "lost the lease of a partition")
		}
		return n
	}
	byName := func(name string) *clusterServer {
		for _, s := range servers {
			if s.name == name {
				return s
			}
		}
		t.Fatalf("no server named %q", name)
		return nil
	}

	var events []event
	var respread []time.Duration
	// strike injects one fault on victim: kill -9 (back after the TTL) or
	// SIGTERM (started again at once), and measures it.
	strike := func(fault string, victim *clusterServer, kill bool) {
		ev := event{fault: fault, target: victim.name, start: time.Now()}
		lost := leasesLost()
		sig := syscall.SIGTERM
		if kill {
			sig = syscall.SIGKILL
		}
		if err := victim.proc.Signal(sig); err != nil {
			t.Fatal(err)
		}
		victim.proc.Wait(t, 60*time.Second)
		elected, jsz := make(chan time.Time, 1), make(chan time.Time, 1)
		go func() { elected <- waitLeaders(ctx, js, assets, victim) }()
		go func() { jsz <- waitLeadersJSZ(ctx, servers, assets, victim) }()
		if !kill {
			startClusterServer(t, victim)
			ev.healed = time.Now()
		}
		ev.clear = <-elected
		if ev.clear.IsZero() {
			t.Fatalf("%s of %s: the streams did not all have a leader again", fault, victim.name)
		}
		if at := <-jsz; at.IsZero() {
			t.Errorf("%s of %s: /jsz never showed every stream and consumer led again", fault, victim.name)
		} else {
			ev.electionJSZ = at.Sub(ev.start)
		}
		mon.watchAgain() // its watch may have lived on the server that went
		r := mon.recoverFrom()
		r.at = ev.clear
		ev.election = ev.clear.Sub(ev.start)
		if kill {
			sleep(ctx, p.ttl)
			startClusterServer(t, victim)
			ev.healed = time.Now()
		}
		waitRecovered(t, ctx, mon, r, fmt.Sprintf("fault %d (%s %s)", len(events)+1, fault, victim.name), 90*time.Second)
		ev.recovery = r.took
		healthy(fmt.Sprintf("after %s of %s", fault, victim.name))
		sleep(ctx, p.ttl)
		waitRecovered(t, ctx, mon, mon.recoverFrom(), fmt.Sprintf("after fault %d", len(events)+1), 60*time.Second)
		ev.leases = leasesLost() - lost
		events = append(events, ev)
		t.Logf("fault %d at %s: %s of %s; every stream led again after %s (%s by /jsz); server back after %s; every record stored at the election applied %s after it; %d leases lost",
			len(events), ev.start.Sub(t0).Round(time.Millisecond), fault, victim.name, ev.election.Round(time.Millisecond), ev.electionJSZ.Round(time.Millisecond),
			ev.healed.Sub(ev.start).Round(time.Millisecond), ev.recovery.Round(time.Millisecond), ev.leases)
	}
	for round := range rounds {
		for _, f := range faults {
			switch f {
			case faultKillLease:
				strike(f, byName(streamLeader(t, ctx, js, "KV_ea_place")), true)
			case faultKillGroup:
				place := streamLeader(t, ctx, js, "KV_ea_place")
				victim := ""
				for _, s := range lay.mailboxes {
					if l := streamLeader(t, ctx, js, s); l != "" && l != place {
						victim = l
						break
					}
				}
				if victim == "" {
					t.Fatalf("round %d: every group's mailbox stream is led by %s, the lease bucket's leader: the leaders did not spread", round+1, place)
				}
				strike(f, byName(victim), true)
			case faultTermNATS:
				strike(f, servers[round%len(servers)], false)
			case faultRollNodes:
				for i, old := range nodes {
					ev := event{fault: f, target: old.id, start: time.Now()}
					lost := leasesLost()
					if err := old.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
					// A node stopping frees its leases: the others must read
					// its partitions at once, so the fault clears as it strikes.
					ev.clear = ev.start
					r := mon.recoverFrom()
					r.at = ev.clear
					old.Wait(t, 60*time.Second)
					retired = append(retired, old)
					nodes[i] = startNode(old.id)
					procs[i] = nodes[i]
					ev.healed = time.Now()
					waitRecovered(t, ctx, mon, r, fmt.Sprintf("fault %d (%s %s)", len(events)+1, f, old.id), 90*time.Second)
					ev.recovery = r.took
					sleep(ctx, p.ttl)
					waitRecovered(t, ctx, mon, mon.recoverFrom(), fmt.Sprintf("after fault %d", len(events)+1), 60*time.Second)
					ev.leases = leasesLost() - lost
					events = append(events, ev)
					t.Logf("fault %d at %s: %s of %s; back and ready after %s; every record stored at the SIGTERM applied %s after it; %d leases lost",
						len(events), ev.start.Sub(t0).Round(time.Millisecond), f, old.id, ev.healed.Sub(ev.start).Round(time.Millisecond),
						ev.recovery.Round(time.Millisecond), ev.leases)
				}
			case faultRolling:
				for _, s := range servers {
					strike(f, s, false)
				}
				took, err := waitSpread(ctx, js, names, 90*time.Second)
				if err != nil {
					t.Errorf("round %d: the leaders did not spread again after the rolling restart: %v", round+1, err)
				} else {
					t.Logf("round %d: leaders spread again %s after the rolling restart", round+1, took.Round(time.Millisecond))
					if took > time.Minute {
						t.Errorf("round %d: the leaders spread again %s after the rolling restart, want within a minute", round+1, took.Round(time.Millisecond))
					}
				}
				respread = append(respread, took)
			}
		}
	}
	for _, m := range procs {
		if !m.Running() {
			t.Fatalf("%s exited by itself: %v", m.id, m.Err())
		}
	}
	close(stopPub)
	pubStopped = true
	if err := <-pubDone; err != nil {
		t.Fatalf("publisher: %v", err)
	}
	last := mon.recoverFrom()
	waitRecovered(t, ctx, mon, last, "the end of the load", 2*time.Minute)
	stopMon()
	<-mon.done
	healthy("at the end")
	stalls := mon.allStalls()
	checkStalls(t, p, stalls, events, nil, t0)
	recoveries(events, stalls)
	sum := checkLog(t, ctx, js, pub, lay)
	t.Logf("log checked: %d inputs (%d bad), %d outputs, %d dead letters %v", sum.inputs, sum.bad, sum.outputs, sum.dead, sum.reasons)
	ok := -1.0 // not summed: a node restarted, and its counts went with it
	if len(retired) == 0 {
		ok = 0
		for _, n := range nodes {
			ok += metricValue(t, n.metrics, "ea_records_processed_total", `kind="counter"`, `outcome="ok"`)
		}
		if int(ok) != sum.inputs-sum.bad {
			t.Errorf(`ea_records_processed_total{kind="counter",outcome="ok"} summed over the nodes is %v, want the %d good inputs applied`, ok, sum.inputs-sum.bad)
		}
	} else {
		t.Logf("ea_records_processed_total not summed: %d node processes restarted (rolling-nodes), their counts went with them", len(retired))
	}
	lost := 0
	for i, e := range events {
		lost += e.leases
		t.Logf("fault %d, %s of %s: election %s, recovery %s, %d counters past the allowance, %d leases lost",
			i+1, e.fault, e.target, e.election.Round(10*time.Millisecond), e.recovery.Round(10*time.Millisecond), e.over, e.leases)
	}
	if lost > 0 {
		t.Errorf("%d leases lost across the cluster's events, want none (DESIGN.md section 6: the cluster's own events are not node failures)", lost)
	}
	clusterReport(t, p, rounds, events, respread, ok, sum.inputs-sum.bad)
}

// asset is a stream, or a consumer of one, whose leader a fault may take;
// the zero asset is the meta leader, which creates and updates consumers
// (a node opening a partition, the monitor's watches).
type asset struct{ stream, consumer string }

func (a asset) String() string {
	switch {
	case a.stream == "":
		return "the meta leader"
	case a.consumer == "":
		return a.stream
	}
	return a.stream + " > " + a.consumer
}

// waitLeaders waits until the meta leader answers and every stream and
// consumer of needed answers with a leader that is not victim while victim
// is down, polling each every 50 ms, and returns the moment the last one
// did (zero if ctx ended first).
func waitLeaders(ctx context.Context, js jetstream.JetStream, needed []asset, victim *clusterServer) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last time.Time
	for _, a := range needed {
		for {
			ictx, icancel := context.WithTimeout(ctx, time.Second)
			if a.stream == "" { // only the meta leader answers account info
				_, err := js.AccountInfo(ictx)
				icancel()
				if err == nil {
					last = later(last, time.Now())
					break
				}
				if ctx.Err() != nil {
					return time.Time{}
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			var cl *jetstream.ClusterInfo
			s, err := js.Stream(ictx, a.stream)
			if err == nil && a.consumer == "" {
				cl = s.CachedInfo().Cluster
			} else if err == nil {
				var c jetstream.Consumer
				if c, err = s.Consumer(ictx, a.consumer); err == nil {
					cl = c.CachedInfo().Cluster
				}
			}
			icancel()
			if cl != nil && cl.Leader != "" && (cl.Leader != victim.name || victim.proc.Running()) {
				last = later(last, time.Now())
				break
			}
			if ctx.Err() != nil {
				return time.Time{}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return last
}

// waitLeadersJSZ is waitLeaders read from the servers' own monitoring
// endpoints: it polls /jsz (accounts, streams and consumers) of every server
// running, every 100 ms, until the meta leader and every stream and consumer
// of needed are each led by a running server that says so itself (its own
// /jsz names itself the leader; a follower's view of the leader may be
// stale), not victim while victim is down; it returns that moment (zero if
// ctx ended first). This is the election as the servers see it, before any
// client could learn of it.
func waitLeadersJSZ(ctx context.Context, servers []*clusterServer, needed []asset, victim *clusterServer) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		led := map[asset]bool{}
		for _, s := range servers {
			if s == victim && !victim.proc.Running() {
				continue
			}
			for _, a := range jszLeads(ctx, client, s) {
				led[a] = true
			}
		}
		all := true
		for _, a := range needed {
			all = all && led[a]
		}
		if all {
			return time.Now()
		}
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return time.Time{}
		}
	}
}

// jszLeads returns what server s says it leads itself, by its /jsz: the
// meta leader (the zero asset), streams and their consumers. Nothing if it
// does not answer.
func jszLeads(ctx context.Context, client *http.Client, s *clusterServer) []asset {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.monitor+"/jsz?accounts=true&streams=true&consumers=true", nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	type cluster struct {
		Leader string `json:"leader"`
	}
	var jsz struct {
		Meta     *cluster `json:"meta_cluster"`
		Accounts []struct {
			Streams []struct {
				Name      string   `json:"name"`
				Cluster   *cluster `json:"cluster"`
				Consumers []struct {
					Name    string   `json:"name"`
					Cluster *cluster `json:"cluster"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&jsz) != nil {
		return nil
	}
	mine := func(c *cluster) bool { return c != nil && c.Leader == s.name }
	var out []asset
	if mine(jsz.Meta) {
		out = append(out, asset{})
	}
	for _, acc := range jsz.Accounts {
		for _, st := range acc.Streams {
			if mine(st.Cluster) {
				out = append(out, asset{stream: st.Name})
			}
			for _, c := range st.Consumers {
				if mine(c.Cluster) {
					out = append(out, asset{stream: st.Name, consumer: c.Name})
				}
			}
		}
	}
	return out
}

// waitSpread waits until no server leads more than a third of a record's
// writes plus one group's share (what placing one stream at a time can
// leave) and all three lead some, as actor's checkLeadersSpread asks, and
// returns how long it took.
func waitSpread(ctx context.Context, js jetstream.JetStream, names bus.Names, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var why string
	for time.Since(start) < timeout {
		load := map[string]float64{}
		var most float64
		complete := true
		for g := range names.Groups() {
			w := float64(len(names.GroupPartitions(g))) / float64(names.Partitions())
			most = max(most, w)
			for _, s := range []string{names.MailboxStreamOf(g), names.OutboxStreamOf(g), "KV_" + names.StateBucketOf(g)} {
				ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := js.Stream(ictx, s)
				cancel()
				if err != nil || st.CachedInfo().Cluster == nil || st.CachedInfo().Cluster.Leader == "" {
					complete = false
					continue
				}
				load[st.CachedInfo().Cluster.Leader] += w
			}
		}
		why = fmt.Sprintf("share of a record's writes each server leads: %v", load)
		spread := complete && len(load) == 3
		for _, l := range load {
			if l > 1+most+1e-9 {
				spread = false
			}
		}
		if spread {
			return time.Since(start), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return 0, fmt.Errorf("not within %s: %s", timeout, why)
}

// metricValue sums the samples of metric at the /metrics of addr whose
// labels include every one of labels (as written, such as `outcome="ok"`).
func metricValue(t testing.TB, addr, metric string, labels ...string) float64 {
	t.Helper()
	code, body := proctest.Get("http://" + addr + "/metrics")
	if code != 200 {
		t.Fatalf("metrics of %s: status %d", addr, code)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			t.Fatalf("metrics of %s: %q: %v", addr, line, err)
		}
		sum += v
	}
	return sum
}

// clusterReport logs the cluster run's table — per fault: how many kept
// every counter within 2 s of the election, the election and the recovery
// (p50 and max), the leases lost — and appends it to TORTURE_REPORT, if set.
func clusterReport(t testing.TB, p plan, rounds int, events []event, respread []time.Duration, ok float64, good int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "torture cluster, %s: 3 nats-server processes (R3), 3 nodes with --stream-groups 3 --partitions %d, %d counters, %d increments/s, lease TTL %s, %d round(s); allowance: the election + %s\n",
		time.Now().UTC().Format(time.RFC3339), p.partitions, p.counters, p.rate, p.ttl, rounds, p.allow)
	fmt.Fprintf(&b, "| fault | within allowance | election p50 (API) | max | election p50 (/jsz) | max | recovery after it p50 | max | max after the /jsz election | leases lost |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range append(slices.Clone(clusterFaults), clusterMore...) {
		var el, jsz, rec, recJSZ []time.Duration
		okn, leases := 0, 0
		for _, e := range events {
			if e.fault != f {
				continue
			}
			el, jsz, rec = append(el, e.election), append(jsz, e.electionJSZ), append(rec, e.recovery)
			recJSZ = append(recJSZ, e.recovery+e.election-e.electionJSZ)
			leases += e.leases
			if e.over == 0 {
				okn++
			}
		}
		if len(el) == 0 {
			continue
		}
		slices.Sort(el)
		slices.Sort(jsz)
		slices.Sort(rec)
		slices.Sort(recJSZ)
		r := func(ds []time.Duration, i int) time.Duration { return ds[i].Round(10 * time.Millisecond) }
		fmt.Fprintf(&b, "| %s | %d/%d | %s | %s | %s | %s | %s | %s | %s | %d |\n", f, okn, len(el), r(el, (len(el)-1)/2), r(el, len(el)-1),
			r(jsz, (len(jsz)-1)/2), r(jsz, len(jsz)-1), r(rec, (len(rec)-1)/2), r(rec, len(rec)-1), r(recJSZ, len(recJSZ)-1), leases)
	}
	for i, d := range respread {
		fmt.Fprintf(&b, "\nround %d: leaders spread again %s after the rolling restart.", i+1, d.Round(100*time.Millisecond))
	}
	if ok >= 0 {
		fmt.Fprintf(&b, "\nea_records_processed_total{outcome=\"ok\"} over the nodes: %v for %d good inputs applied.\n", ok, good)
	}
	writeReport(t, b.String())
}

// streamLeader is the name of the server leading stream, "" if none now.
func streamLeader(t testing.TB, ctx context.Context, js jetstream.JetStream, stream string) string {
	t.Helper()
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, stream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// streamHealthy reports whether stream has a leader and every replica is
// current.
func streamHealthy(ctx context.Context, js jetstream.JetStream, stream string) bool {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, stream)
	if err != nil {
		return false
	}
	c := s.CachedInfo().Cluster
	if c == nil || c.Leader == "" {
		return false
	}
	for _, r := range c.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}
