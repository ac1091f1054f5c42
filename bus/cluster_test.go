package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

func TestServerConfigValidate(t *testing.T) {
	t.Parallel()
	cluster := bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:0", Routes: []string{"nats-route://127.0.0.1:6222", "nats://10.0.0.2:6222"}}
	valid := []bus.ServerConfig{
		{},
		{Listen: "127.0.0.1:0", Name: "n1"},
		{Name: "n-1.a_b", Cluster: cluster},
		{Name: "n1", Cluster: bus.ClusterConfig{Name: "c1", Listen: ":6222"}},
	}
	for _, cfg := range valid {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", cfg, err)
		}
	}
	invalid := []struct {
		name    string
		cfg     bus.ServerConfig
		setting string // what the message must name
	}{
		{"bad listen", bus.ServerConfig{Listen: "nowhere"}, "listen address"},
		{"bad server name", bus.ServerConfig{Name: "a b"}, "server name"},
		{"cluster without server name", bus.ServerConfig{Cluster: cluster}, "server Name"},
		{"cluster without listen", bus.ServerConfig{Name: "n1", Cluster: bus.ClusterConfig{Name: "c1"}}, "Cluster.Listen"},
		{"bad cluster listen", bus.ServerConfig{Name: "n1", Cluster: bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:99999"}}, "Cluster.Listen"},
		{"bad cluster name", bus.ServerConfig{Name: "n1", Cluster: bus.ClusterConfig{Name: "c 1", Listen: ":0"}}, "cluster name"},
		{"routes without cluster", bus.ServerConfig{Cluster: bus.ClusterConfig{Routes: []string{"nats-route://127.0.0.1:6222"}}}, "Cluster.Name"},
		{"listen without cluster", bus.ServerConfig{Cluster: bus.ClusterConfig{Listen: ":6222"}}, "Cluster.Name"},
		{"route scheme", bus.ServerConfig{Name: "n1", Cluster: bus.ClusterConfig{Name: "c1", Listen: ":0", Routes: []string{"http://127.0.0.1:6222"}}}, "http://127.0.0.1:6222"},
		{"route without port", bus.ServerConfig{Name: "n1", Cluster: bus.ClusterConfig{Name: "c1", Listen: ":0", Routes: []string{"nats-route://127.0.0.1"}}}, "nats-route://host:port"},
		{"route bad port", bus.ServerConfig{Name: "n1", Cluster: bus.ClusterConfig{Name: "c1", Listen: ":0", Routes: []string{"nats-route://127.0.0.1:0"}}}, "port must be 1-65535"},
	}
	for _, tc := range invalid {
		err := tc.cfg.Validate()
		if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("%s: Validate = %v; want ErrInvalidConfig naming %q", tc.name, err, tc.setting)
		}
		if _, err := bus.StartServer(tc.cfg); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: StartServer = %v; want ErrInvalidConfig", tc.name, err)
		}
	}
}

// streamReplicas returns the configured replicas of stream and the names of
// the servers holding it (leader first), failing t if it cannot be read.
func streamReplicas(t *testing.T, js jetstream.JetStream, stream string) (int, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		t.Fatalf("stream %s: no cluster info", stream)
	}
	servers := []string{info.Cluster.Leader}
	for _, p := range info.Cluster.Replicas {
		servers = append(servers, p.Name)
	}
	return info.Config.Replicas, servers
}

// TestClusterProvisionsReplicas provisions with Replicas 3 on a 3-server
// cluster: every stream and bucket has three replicas, one on each server.
func TestClusterProvisionsReplicas(t *testing.T) {
	c := bustest.NewCluster(t, 3)
	conn := c.Connect(t, bus.Config{Replicas: 3, Logger: quiet})
	if got := strings.Count(conn.Config().URL, ",") + 1; got != 3 {
		t.Fatalf("cluster URL %q names %d servers; want 3", conn.Config().URL, got)
	}
	n := conn.Names()
	for _, stream := range []string{n.MailboxStream(), n.OutboxStream(), n.DeadStream(), "KV_" + n.StateBucket(), "KV_" + n.OrchBucket(), "KV_" + n.PlaceBucket()} {
		replicas, servers := streamReplicas(t, conn.JetStream(), stream)
		if replicas != 3 {
			t.Errorf("%s: %d replicas; want 3", stream, replicas)
		}
		seen := map[string]bool{}
		for _, s := range servers {
			seen[s] = true
		}
		for _, s := range c.Servers {
			if !seen[s.Name] {
				t.Errorf("%s: held by %q; not by %s", stream, servers, s.Name)
			}
		}
		if leader := c.StreamLeader(t, stream); leader.Name != servers[0] {
			t.Errorf("%s: StreamLeader = %s; stream info says %s", stream, leader.Name, servers[0])
		}
	}
	// Provisioning again, as every node does at start, changes nothing.
	if err := conn.Provision(t.Context()); err != nil {
		t.Fatalf("second Provision: %v", err)
	}

	// A stream leader's election closes Dropped's channel once the
	// connection follows elections, though the connection stays up: a write
	// sent to the old leader is sent again at once, not after its timeout.
	if err := conn.FollowElections(); err != nil {
		t.Fatal(err)
	}
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	dropped, disconnects := conn.Dropped(), conn.Disconnects()
	stream := "KV_" + n.PlaceBucket()
	if _, err := conn.NATS().Request(n.StreamStepDown(stream), nil, 5*time.Second); err != nil {
		t.Fatalf("step down the leader of %s: %v", stream, err)
	}
	select {
	case <-dropped:
	case <-time.After(15 * time.Second):
		t.Fatalf("Dropped's channel still open 15s after the leader of %s stepped down (%d elections heard)", stream, conn.Elections())
	}
	if conn.Elections() == 0 {
		t.Error("Elections() = 0 after an election closed Dropped's channel")
	}
	if got := conn.Disconnects(); got != disconnects {
		t.Errorf("Disconnects() = %d after an election, want %d: elections are not disconnects", got, disconnects)
	}
}

// TestClusterKeepsWhatIsProvisioned: a connection that does not say how many
// replicas and partitions (a supervisor, a node started without the flags)
// takes those of the provisioned deployment and provisions without scaling
// its streams down. Before, such a supervisor set every stream to one
// replica, and failed on a deployment of another partition count.
func TestClusterKeepsWhatIsProvisioned(t *testing.T) {
	c := bustest.NewCluster(t, 3)
	nodes := c.Connect(t, bus.Config{Replicas: 3, Partitions: 16, Logger: quiet})
	// bustest's Connect sets replicas: connect as a supervisor does.
	connect := func(cfg bus.Config) *bus.Conn {
		t.Helper()
		cfg.URL, cfg.Logger = c.URL(), quiet
		conn, err := bus.Connect(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if err := conn.Provision(t.Context()); err != nil {
			t.Fatalf("provision with %+v: %v", cfg, err)
		}
		return conn
	}
	other := connect(bus.Config{})
	if got := other.Config(); got.Replicas != 3 || got.Partitions != 16 || other.Names().Partitions() != 16 {
		t.Errorf("a connection without replicas and partitions has %d replicas and %d partitions (names %d); want 3 and 16",
			got.Replicas, got.Partitions, other.Names().Partitions())
	}
	n := nodes.Names()
	for _, stream := range []string{n.MailboxStream(), n.OutboxStream(), n.DeadStream(), "KV_" + n.StateBucket(), "KV_" + n.OrchBucket(), "KV_" + n.PlaceBucket()} {
		if replicas, _ := streamReplicas(t, nodes.JetStream(), stream); replicas != 3 {
			t.Errorf("%s: %d replicas after another process provisioned; want 3", stream, replicas)
		}
	}
	// With nothing provisioned, the defaults.
	fresh := connect(bus.Config{Prefix: "fresh"})
	if got := fresh.Config(); got.Replicas != 1 || got.Partitions != bus.DefaultPartitions {
		t.Errorf("fresh deployment: %d replicas, %d partitions; want 1 and %d", got.Replicas, got.Partitions, bus.DefaultPartitions)
	}
}

// publishRecord publishes a record with id to subject, retrying for up to
// 20s while the cluster elects a new leader. The id makes retries safe.
func publishRecord(t *testing.T, js jetstream.JetStream, subject, id string) {
	t.Helper()
	rec, err := records.New("inc", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.ID = id
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := js.PublishMsg(ctx, rec.Msg(subject))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterServersStop stops servers of a 3-server cluster one at a time
// while a client publishes: first the server a multi-URL connection is on
// (the connection moves to another), then, with that one back, the server
// leading the records stream (another is elected). Publishing goes on, no
// record is lost or stored twice, and a restarted server rejoins.
func TestClusterServersStop(t *testing.T) {
	c := bustest.NewCluster(t, 3)
	conn := c.Connect(t, bus.Config{Logger: quiet})
	if got := conn.Config().Replicas; got != 3 {
		t.Fatalf("bustest Connect on 3 servers: replicas %d; want 3", got)
	}
	if got := conn.Config().URL; got != c.URL() || strings.Count(got, ",") != 2 {
		t.Fatalf("connection URL %q; want the 3 servers' URLs %q", got, c.URL())
	}
	stream := conn.Names().MailboxStream()
	subject := conn.Names().Mailbox(records.Ref{Kind: "counter", ID: "c1"})
	next := 0
	publish := func(n int) {
		t.Helper()
		for range n {
			publishRecord(t, conn.JetStream(), subject, fmt.Sprintf("r%d", next))
			next++
		}
	}
	checkMsgs := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := conn.JetStream().Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().State.Msgs; got != uint64(next) {
			t.Fatalf("stream %s holds %d records; want %d", stream, got, next)
		}
	}
	byName := func(name string) *bustest.ClusterServer {
		t.Helper()
		for _, s := range c.Servers {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("connected to %q, not a server of the cluster", name)
		return nil
	}
	publish(50)

	// The server the connection is on stops.
	on := byName(conn.NATS().ConnectedServerName())
	on.Shutdown()
	stopped := time.Now()
	publish(50)
	t.Logf("50 records published %s after stopping %s, the connection's server", time.Since(stopped).Round(time.Millisecond), on.Name)
	if got := conn.NATS().ConnectedServerName(); got == on.Name || got == "" {
		t.Errorf("connection still on %q after its server stopped", got)
	}
	checkMsgs()
	on.Restart(t)

	// The leader of the records stream stops.
	leader := c.StreamLeader(t, stream)
	leader.Shutdown()
	stopped = time.Now()
	publish(50)
	t.Logf("50 records published %s after stopping %s, leader of %s", time.Since(stopped).Round(time.Millisecond), leader.Name, stream)
	if now := c.StreamLeader(t, stream); now == leader {
		t.Fatalf("stream %s still led by the stopped server", stream)
	}
	// The same ids again: the new leader still drops them as duplicates.
	for i := range 10 {
		publishRecord(t, conn.JetStream(), subject, fmt.Sprintf("r%d", i))
	}
	checkMsgs()

	leader.Restart(t)
	if !leader.Running() {
		t.Fatal("restarted server not running")
	}
	publish(1)
	checkMsgs()
}

// TestClusterProvisionNeedsEnoughServers: 5 replicas cannot be placed on 3
// servers, and the error names the stream and the reason.
func TestClusterProvisionNeedsEnoughServers(t *testing.T) {
	c := bustest.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{URL: c.URL(), Replicas: 5, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	err = conn.Provision(ctx)
	if err == nil {
		t.Fatal("Provision with 5 replicas on 3 servers succeeded")
	}
	t.Logf("Provision with 5 replicas on 3 servers: %v", err)
	if !strings.Contains(err.Error(), "EA_MBOX") {
		t.Errorf("error %q does not name the stream", err)
	}
}
