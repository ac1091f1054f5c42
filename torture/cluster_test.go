//go:build unix

package torture

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterServer is one nats-server process of a 3-server JetStream cluster.
type clusterServer struct {
	name, addr, route, store string
	proc                     *proctest.Proc
	gen                      int
}

// startClusterServer starts s with routes to all, and waits until it says
// it is ready.
func startClusterServer(t testing.TB, s *clusterServer, routes string) {
	t.Helper()
	s.gen++
	host, port, _ := strings.Cut(s.addr, ":")
	args := []string{"-a", host, "-p", port, "-js", "-sd", s.store, "-n", s.name,
		"--cluster_name", "torture", "--cluster", "nats://" + s.route, "--routes", routes}
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

// TestTortureCluster runs 3 nodes (--replicas 3) and the supervisor on a
// 3-server cluster, and kills the server leading the mailbox stream, twice,
// under load; then checks the log as TestTorture does. It runs in the long
// form only (TORTURE=long, or TORTURE_CLUSTER=1).
func TestTortureCluster(t *testing.T) {
	if os.Getenv("TORTURE") != "long" && os.Getenv("TORTURE_CLUSTER") == "" {
		t.Skip("the cluster run is part of the long form: TORTURE=long or TORTURE_CLUSTER=1")
	}
	p := plan{name: "cluster", nodes: 3, partitions: 64, counters: envInt(t, "TORTURE_COUNTERS", 200), rate: 250,
		badEvery: 97, heartbeat: time.Second, ttl: 3 * time.Second, timeout: 8 * time.Minute} // inside go test's default 10m, so that cleanup stops every process
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	t0 := time.Now()

	servers := make([]*clusterServer, 3)
	var routes, urls []string
	for i := range servers {
		servers[i] = &clusterServer{name: fmt.Sprint("s", i), addr: proctest.FreeAddr(t), route: proctest.FreeAddr(t), store: t.TempDir()}
		routes = append(routes, "nats://"+servers[i].route)
		urls = append(urls, "nats://"+servers[i].addr)
	}
	for _, s := range servers {
		startClusterServer(t, s, strings.Join(routes, ","))
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
	var nodes []*member
	for i := range p.nodes {
		id := fmt.Sprintf("n%d", i)
		for attempt := 1; ; attempt++ {
			metrics := proctest.FreeAddr(t)
			args := []string{"--nats", url, "--replicas", "3", "--metrics", metrics, "--node-id", id,
				"--heartbeat", p.heartbeat.String(), "--heartbeat-ttl", p.ttl.String(), "--idle", "5s", "--shutdown-grace", "5s"}
			n := &member{Proc: proctest.Start(t, fmt.Sprintf("%s-%d", id, attempt), bins.node, args, proctest.Environ("EA_")), id: id, metrics: metrics}
			for n.Running() && !n.ready() {
				time.Sleep(50 * time.Millisecond)
			}
			if n.Running() {
				nodes = append(nodes, n)
				break
			}
			t.Logf("%s exited before ready (attempt %d): %v\n%s", id, attempt, n.Err(), proctest.Tail(n.Stderr.String(), 3))
			if attempt == 3 {
				t.Fatalf("%s did not start in %d attempts", id, attempt)
			}
		}
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
	t.Logf("cluster of 3 servers, 3 nodes with --replicas 3 and %d supervisor(s) deployed in %s", len(procs)-len(nodes), time.Since(t0).Round(time.Millisecond))

	// What the nodes provisioned must still be replicated after the
	// supervisor provisioned too.
	for _, name := range []string{"EA_MBOX", "EA_OUT", "EA_DEAD", "KV_ea_state", "KV_ea_place"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s has %d replica(s) after the supervisor started, want the nodes' 3: a server's death loses it", name, r)
		}
	}

	counters := createCounters(t, nc, p.counters)
	kv, err := js.KeyValue(ctx, "ea_state")
	if err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(js, counters, p.rate, p.badEvery)
	monCtx, stopMon := context.WithCancel(ctx)
	mon := startMonitor(monCtx, kv, pub)
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

	var events []event
	for i := range 2 {
		leader := streamLeader(t, ctx, js, "EA_MBOX")
		var victim *clusterServer
		for _, s := range servers {
			if s.name == leader {
				victim = s
			}
		}
		if victim == nil {
			t.Fatalf("EA_MBOX's leader %q is none of the servers", leader)
		}
		ev := event{fault: "kill-leader", target: victim.name, start: time.Now()}
		if err := victim.proc.Signal(os.Kill); err != nil {
			t.Fatal(err)
		}
		victim.proc.Wait(t, 30*time.Second)
		actortest.Eventually(t, 60*time.Second, "EA_MBOX to elect a new leader", func() bool {
			l := streamLeader(t, ctx, js, "EA_MBOX")
			return l != "" && l != victim.name
		})
		// The fault clears when the mailbox stream has a new leader: nothing
		// can be read or stored before.
		r := mon.recoverFrom()
		ev.clear = r.at
		elected := ev.clear.Sub(ev.start)
		sleep(ctx, p.ttl)
		startClusterServer(t, victim, strings.Join(routes, ","))
		ev.healed = time.Now()
		waitRecovered(t, ctx, mon, r, fmt.Sprintf("fault %d (kill-leader %s)", i+1, victim.name), 60*time.Second)
		ev.recovery = r.took
		events = append(events, ev)
		t.Logf("fault %d at %s: kill -9 of %s, EA_MBOX's leader; new leader after %s; server back after %s; every record stored at the election applied %s after it",
			i+1, ev.start.Sub(t0).Round(time.Millisecond), victim.name, elected.Round(time.Millisecond),
			ev.healed.Sub(ev.start).Round(time.Millisecond), ev.recovery.Round(time.Millisecond))
		sleep(ctx, p.ttl)
		waitRecovered(t, ctx, mon, mon.recoverFrom(), fmt.Sprintf("after fault %d", i+1), 60*time.Second)
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
	for _, name := range []string{"EA_MBOX", "EA_OUT", "EA_DEAD"} {
		actortest.Eventually(t, 60*time.Second, name+" to have a leader and every replica current", func() bool {
			return streamHealthy(ctx, js, name)
		})
	}
	stalls := mon.allStalls()
	checkStalls(t, p, stalls, events, nil, t0)
	recoveries(events, stalls)
	sum := checkLog(t, ctx, js, pub)
	t.Logf("log checked: %d inputs (%d bad), %d outputs, %d dead letters %v", sum.inputs, sum.bad, sum.outputs, sum.dead, sum.reasons)
	for i, e := range events {
		t.Logf("fault %d, kill-leader of %s: recovery %s, %d counters past the allowance", i+1, e.target, e.recovery.Round(10*time.Millisecond), e.over)
	}
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
