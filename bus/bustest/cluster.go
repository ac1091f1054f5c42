package bustest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a NATS cluster of servers with JetStream, routed to each other
// on 127.0.0.1: in the test's process, or each a nats-server process of its
// own when [ServerEnv] names a binary (as `make test` runs them):
//
//	c := bustest.NewCluster(t, 3)  // 3 servers, a JetStream meta leader elected
//	conn := c.Connect(t)           // provisioned with 3 replicas
//	c.StreamLeader(t, "EA_MBOX").Shutdown()
//
// Everything started is stopped by t.Cleanup.
type Cluster struct {
	// Name is the cluster name.
	Name string
	// Servers are the servers, in start order; each can be stopped and
	// restarted on its own.
	Servers []*ClusterServer

	bin string // a nats-server binary to run (ServerEnv), or "" to embed

	mu       sync.Mutex
	mappings map[string]string // added by MapMailboxes, kept across Restart
}

// ClusterServer is one server of a [Cluster].
type ClusterServer struct {
	// Name is the server name, unique in the cluster.
	Name string
	// URL is the client URL, stable across Restart.
	URL string
	// StoreDir is the JetStream store directory, kept across Restart.
	StoreDir string

	cluster     *Cluster
	addr        string // client address
	clusterAddr string // route address
	monitorAddr string // monitoring (HTTP) address, of a process

	mu   sync.Mutex
	srv  *bus.Server // the embedded server while running, when cluster.bin is ""
	proc *process    // the server process while running, when cluster.bin is set
}

// clusterReadyTimeout bounds the wait for a meta leader.
const clusterReadyTimeout = 30 * time.Second

// NewCluster starts a cluster of n servers (1-5) on free ports of 127.0.0.1,
// each storing in its own t.TempDir(), and waits until JetStream has a meta
// leader that knows all n servers. The servers run in the test's process,
// or as processes when [ServerEnv] names a nats-server binary; the
// cluster's methods read their state either way (a process's through its
// monitoring port).
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 || n > 5 {
		t.Fatalf("bustest: NewCluster(%d): want 1-5 servers", n)
	}
	bin := serverBinary(t)
	var c *Cluster
	var err error
	for range 5 { // a reserved port may be taken by someone else before we use it
		if c, err = startCluster(t, n, bin); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("bustest: start cluster of %d: %v", n, err)
	}
	c.WaitReady(t)
	return c
}

// startCluster reserves 3n ports and starts n servers on them, running bin
// unless it is "".
func startCluster(t testing.TB, n int, bin string) (*Cluster, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: "ea-test", bin: bin}
	for i := range n {
		c.Servers = append(c.Servers, &ClusterServer{
			Name:        fmt.Sprintf("ea-test-%d", i),
			StoreDir:    t.TempDir(),
			cluster:     c,
			addr:        ports[3*i],
			clusterAddr: ports[3*i+1],
			monitorAddr: ports[3*i+2],
		})
	}
	// Start them together: each waits for clients only, JetStream elects
	// its meta leader once the routes are up.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Go(func() { errs[i] = s.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	for _, s := range c.Servers {
		s.URL = "nats://" + s.addr
	}
	t.Cleanup(c.Shutdown)
	return c, nil
}

// freePorts returns n distinct free addresses on 127.0.0.1.
func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a port: %w", err)
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

func (s *ClusterServer) start() error {
	var routes []string
	for _, o := range s.cluster.Servers {
		if o != s {
			routes = append(routes, "nats-route://"+o.clusterAddr)
		}
	}
	s.cluster.mu.Lock()
	mappings := maps.Clone(s.cluster.mappings)
	s.cluster.mu.Unlock()
	routing := bus.ClusterConfig{Name: s.cluster.Name, Listen: s.clusterAddr, Routes: routes}
	var srv *bus.Server
	var proc *process
	var err error
	if bin := s.cluster.bin; bin != "" {
		proc, err = startProcess(bin, processConfig{
			name: s.Name, addr: s.addr, storeDir: s.StoreDir, mappings: mappings,
			monitor: s.monitorAddr, cluster: &routing,
		})
	} else {
		srv, err = bus.StartServer(bus.ServerConfig{
			Name: s.Name, Listen: s.addr, StoreDir: s.StoreDir, Cluster: routing, Mappings: mappings,
		})
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.srv, s.proc = srv, proc
	s.mu.Unlock()
	return nil
}

// MapMailboxes adds the account subject mapping that stream groups need
// (see [bus.Names.MailboxMapping]) to every server, running or restarted
// later, as an operator adds it to every server's configuration:
//
//	names, _ := bus.NewNames("ea")
//	names, _ = names.WithPartitions(16)
//	c.MapMailboxes(t, names)
//	conn := c.Connect(t, bus.Config{Partitions: 16, Groups: 4})
func (c *Cluster) MapMailboxes(t testing.TB, names bus.Names) {
	t.Helper()
	src, dest := names.MailboxMapping()
	c.mu.Lock()
	if c.mappings == nil {
		c.mappings = map[string]string{}
	}
	c.mappings[src] = dest
	mappings := maps.Clone(c.mappings)
	c.mu.Unlock()
	for _, s := range c.Servers {
		srv, proc := s.running()
		switch {
		case srv != nil:
			if err := srv.MapSubjects(src, dest); err != nil {
				t.Fatalf("bustest: %v", err)
			}
		case proc != nil:
			if err := proc.reload(mappings); err != nil {
				t.Fatalf("bustest: %v", err)
			}
			waitMapped(t, s.URL, names, proc.out)
		}
	}
}

// URL is the comma-separated client URLs of all servers, the form
// [bus.Config.URL] takes.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL
	}
	return strings.Join(urls, ",")
}

// Connect connects to the cluster with cfg (URL set to every server,
// replicas to the cluster size, at most 3, unless set; prefix "ea" unless
// set), provisions streams and buckets, and closes the connection at
// cleanup.
func (c *Cluster) Connect(t testing.TB, cfg ...bus.Config) *bus.Conn {
	t.Helper()
	var conf bus.Config
	if len(cfg) > 0 {
		conf = cfg[0]
	}
	conf.URL = c.URL()
	if conf.Replicas == 0 {
		conf.Replicas = min(len(c.Servers), 3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, conf)
	if err != nil {
		t.Fatalf("bustest: connect to cluster: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// A JetStream API reply can be lost while a young cluster moves a
	// leader, and the request then waits for its whole context: bound each
	// attempt and provision again (it is idempotent).
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		err = conn.Provision(actx)
		acancel()
		if err == nil {
			return conn
		}
		if attempt == 3 || ctx.Err() != nil {
			t.Fatalf("bustest: provision on cluster (%d attempts): %v", attempt, err)
		}
		t.Logf("bustest: provision on cluster: %v; trying again", err)
	}
}

// WaitReady waits until a running server leads the JetStream meta group,
// knows every running server as a peer, every running server has caught
// up with it, and it places a stream on as many servers as are running
// (the meta leader may know a peer before it has the peer's configuration,
// and refuses placement on it until then: "no suitable peers for
// placement, peer offline").
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		ready, why := c.ready()
		if ready {
			ready, why = c.places()
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bustest: cluster not ready after %s: %s", clusterReadyTimeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// places creates a stream with a replica on every running server, and
// deletes it: whether the meta leader places on all of them.
func (c *Cluster) places() (bool, string) {
	var urls []string
	for _, s := range c.Servers {
		if s.Running() {
			urls = append(urls, s.URL)
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(2*time.Second))
	if err != nil {
		return false, fmt.Sprintf("connect to place a probe stream: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name := "BUSTEST_READY_" + nats.NewInbox()[len(nats.InboxPrefix):] // a nuid
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"bustest.ready." + name}, Replicas: len(urls), Storage: jetstream.MemoryStorage}); err != nil {
		return false, fmt.Sprintf("place a stream on %d servers: %v", len(urls), err)
	}
	if err := js.DeleteStream(ctx, name); err != nil {
		return false, fmt.Sprintf("delete the probe stream: %v", err)
	}
	return true, ""
}

func (c *Cluster) ready() (bool, string) {
	var running []string
	var leader *bus.JetStreamStatus
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		running = append(running, s.Name)
		st := s.jetStreamStatus()
		if !st.Current {
			return false, s.Name + " has not caught up with a meta leader"
		}
		if st.MetaLeader {
			leader = &st
		}
	}
	if leader == nil {
		return false, "no meta leader"
	}
	for _, name := range running {
		if !slices.Contains(leader.Peers, name) {
			return false, fmt.Sprintf("the meta leader knows peers %q, not %s", leader.Peers, name)
		}
	}
	return true, ""
}

// MetaLeader returns the server leading the JetStream meta group, waiting
// for one.
func (c *Cluster) MetaLeader(t testing.TB) *ClusterServer {
	t.Helper()
	return c.waitFor(t, "a JetStream meta leader", func(s *ClusterServer) bool { return s.jetStreamStatus().MetaLeader })
}

// StreamLeader returns the server leading stream (a KV bucket b is stream
// KV_b), waiting for a running server to lead it.
func (c *Cluster) StreamLeader(t testing.TB, stream string) *ClusterServer {
	t.Helper()
	return c.waitFor(t, "a leader of stream "+stream, func(s *ClusterServer) bool { return s.leadsStream(stream) })
}

func (c *Cluster) waitFor(t testing.TB, what string, match func(*ClusterServer) bool) *ClusterServer {
	t.Helper()
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		for _, s := range c.Servers {
			if s.Running() && match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("bustest: no server is %s after %s", what, clusterReadyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Shutdown stops every server; it is safe to call more than once. In the
// test's process it first waits (up to 10s) for the running servers to be
// healthy: nats-server leaks the goroutines of a replicated group's log when
// it stops while still creating that group (after a restart, or while
// consumers are created).
func (c *Cluster) Shutdown() {
	if c.bin == "" {
		c.waitHealthy(10 * time.Second)
	}
	var wg sync.WaitGroup
	for _, s := range c.Servers {
		wg.Go(s.Shutdown)
	}
	wg.Wait()
}

// waitHealthy waits up to timeout until every running server is healthy,
// and returns the last problem seen, or nil.
func (c *Cluster) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var err error
		for _, s := range c.Servers {
			if s.Running() {
				if err = s.healthy(); err != nil {
					break
				}
			}
		}
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running returns the running server: embedded, or a process; both nil
// when stopped.
func (s *ClusterServer) running() (*bus.Server, *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv, s.proc
}

// Running reports whether the server is running.
func (s *ClusterServer) Running() bool {
	srv, proc := s.running()
	return srv != nil || proc != nil
}

// Server returns the running embedded server; nil when stopped or when
// the cluster runs as processes (see [ServerEnv]).
func (s *ClusterServer) Server() *bus.Server {
	srv, _ := s.running()
	return srv
}

// Traffic returns the server's message counters (see [bus.Traffic]), zero
// when it is stopped or does not answer.
func (s *ClusterServer) Traffic() bus.Traffic {
	srv, proc := s.running()
	if srv != nil {
		return srv.Traffic()
	}
	var v struct {
		InMsgs   int64 `json:"in_msgs"`
		OutMsgs  int64 `json:"out_msgs"`
		InBytes  int64 `json:"in_bytes"`
		OutBytes int64 `json:"out_bytes"`
	}
	if proc == nil || proc.monitorJSON("/varz", &v) != nil {
		return bus.Traffic{}
	}
	return bus.Traffic{InMsgs: v.InMsgs, OutMsgs: v.OutMsgs, InBytes: v.InBytes, OutBytes: v.OutBytes}
}

// jetStreamStatus is the server's view of the JetStream meta group (see
// [bus.Server.JetStreamStatus]); zero when it is stopped or does not answer.
// A process reports it on /jsz; it is current when /healthz finds its meta
// layer healthy.
func (s *ClusterServer) jetStreamStatus() bus.JetStreamStatus {
	srv, proc := s.running()
	if srv != nil {
		return srv.JetStreamStatus()
	}
	if proc == nil {
		return bus.JetStreamStatus{}
	}
	var jsz struct {
		Meta *struct {
			Leader   string `json:"leader"`
			Replicas []struct {
				Name    string `json:"name"`
				Offline bool   `json:"offline"`
			} `json:"replicas"`
		} `json:"meta_cluster"`
	}
	if proc.monitorJSON("/jsz", &jsz) != nil || jsz.Meta == nil {
		return bus.JetStreamStatus{}
	}
	st := bus.JetStreamStatus{Clustered: true, Current: proc.healthz("js-meta-only=true") == nil}
	if st.MetaLeader = jsz.Meta.Leader == s.Name; st.MetaLeader {
		st.Peers = []string{s.Name}
		for _, r := range jsz.Meta.Replicas {
			if !r.Offline {
				st.Peers = append(st.Peers, r.Name)
			}
		}
	}
	return st
}

// leadsStream reports whether the server leads stream (see
// [bus.Server.LeadsStream]); a process reports the leader of each stream it
// holds on /jsz.
func (s *ClusterServer) leadsStream(stream string) bool {
	srv, proc := s.running()
	if srv != nil {
		return srv.LeadsStream(stream)
	}
	if proc == nil {
		return false
	}
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name    string `json:"name"`
				Cluster *struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if proc.monitorJSON("/jsz?accounts=true&streams=true", &jsz) != nil {
		return false
	}
	for _, a := range jsz.Accounts {
		for _, st := range a.Streams {
			if st.Name == stream && st.Cluster != nil && st.Cluster.Leader == s.Name {
				return true
			}
		}
	}
	return false
}

// healthy is the server's health as its /healthz says (see
// [bus.Server.Healthy]); nil when it is stopped.
func (s *ClusterServer) healthy() error {
	srv, proc := s.running()
	switch {
	case srv != nil:
		return srv.Healthy()
	case proc != nil:
		return proc.healthz("")
	}
	return nil
}

// Shutdown stops the server; the others go on. It is safe to call more than
// once.
func (s *ClusterServer) Shutdown() {
	s.mu.Lock()
	srv, proc := s.srv, s.proc
	s.srv, s.proc = nil, nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
	}
	if proc != nil {
		proc.stop()
	}
}

// Restart stops the server if it runs and starts it again with the same name,
// addresses and store, as an operator restarting one nats-server of a
// cluster would; it then waits until the cluster is ready and every running
// server healthy (its streams and consumers caught up).
func (s *ClusterServer) Restart(t testing.TB) {
	t.Helper()
	s.Shutdown()
	var err error
	for range 50 { // the port may linger briefly after a shutdown
		if err = s.start(); err == nil {
			s.cluster.WaitReady(t)
			if err := s.cluster.waitHealthy(clusterReadyTimeout); err != nil {
				t.Fatalf("bustest: restart %s: not healthy after %s: %v", s.Name, clusterReadyTimeout, err)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("bustest: restart %s: %v", s.Name, err)
}
