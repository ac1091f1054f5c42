package bustest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestConnectPartitions: a fresh server gets bustest.Partitions a kind; a
// later connection, and one after a restart, adopts what is provisioned;
// a count asked for is provisioned as asked.
func TestConnectPartitions(t *testing.T) {
	srv := bustest.NewServer(t)
	if got := srv.Connect(t).Names().Partitions(); got != bustest.Partitions {
		t.Fatalf("fresh server: %d partitions, want %d", got, bustest.Partitions)
	}
	if got := srv.Connect(t).Names().Partitions(); got != bustest.Partitions {
		t.Fatalf("second connection: %d partitions, want %d", got, bustest.Partitions)
	}
	srv.Restart(t)
	if got := srv.Connect(t).Names().Partitions(); got != bustest.Partitions {
		t.Fatalf("after a restart: %d partitions, want %d", got, bustest.Partitions)
	}

	other := bustest.NewServer(t)
	if got := other.Connect(t, bus.Config{Partitions: bus.DefaultPartitions}).Names().Partitions(); got != bus.DefaultPartitions {
		t.Fatalf("asked for %d: %d partitions", bus.DefaultPartitions, got)
	}
	if got := other.Connect(t).Names().Partitions(); got != bus.DefaultPartitions {
		t.Fatalf("connection to a server provisioned with %d: %d partitions", bus.DefaultPartitions, got)
	}
}

// bothWays returns the two ways to run a server: embedded (no binary) and
// as a process (the nats-server binary ServerEnv names, or one built from
// go.mod's version when it names none).
func bothWays(t *testing.T) []struct{ name, bin string } {
	t.Helper()
	bin := os.Getenv(bustest.ServerEnv)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "nats-server")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			t.Fatalf("build nats-server: %v\n%s", err, out)
		}
	}
	return []struct{ name, bin string }{{"embedded", ""}, {"process", bin}}
}

// TestServerBothWays runs a server embedded and as a process of its own
// (the nats-server binary ServerEnv names, or one built from go.mod's
// version when it names none): each serves JetStream, keeps its URL and
// its store across Restart, maps mailboxes after MapMailboxes, and is gone
// after Shutdown.
func TestServerBothWays(t *testing.T) {
	for _, mode := range bothWays(t) {
		t.Run(mode.name, func(t *testing.T) {
			t.Setenv(bustest.ServerEnv, mode.bin)
			srv := bustest.NewServer(t)
			conn := srv.Connect(t)
			ctx := context.Background()
			if _, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "KEPT", Subjects: []string{"kept"}}); err != nil {
				t.Fatal(err)
			}
			url := srv.URL
			srv.Restart(t)
			if srv.URL != url {
				t.Fatalf("URL %s after a restart, was %s", srv.URL, url)
			}
			nc, js := srv.Client(t)
			if _, err := js.Stream(ctx, "KEPT"); err != nil {
				t.Fatalf("stream after a restart: %v", err)
			}

			names := conn.Names()
			srv.MapMailboxes(t, names)
			sub, err := nc.SubscribeSync("ea.mbox.>")
			if err != nil {
				t.Fatal(err)
			}
			ref := records.Ref{Kind: "counter", ID: "c1"}
			msg := nats.NewMsg(names.Mailbox(ref))
			msg.Header.Set("Nats-Expected-Stream", "NO_SUCH_STREAM") // not stored
			if err := nc.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
			got, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatalf("mapped mailbox publish: %v", err)
			}
			if want := names.StoredMailbox(ref); got.Subject != want {
				t.Fatalf("a publish to %s arrived as %s, want %s", names.Mailbox(ref), got.Subject, want)
			}

			srv.Shutdown()
			if c, err := nats.Connect(url, nats.NoReconnect(), nats.Timeout(time.Second)); err == nil {
				c.Close()
				t.Fatalf("%s still accepts clients after Shutdown", url)
			}
		})
	}
}

// TestClusterBothWays runs a 3-server cluster embedded and as processes:
// StreamLeader names the leader the stream's own info names, before and
// after that leader stops; a stopped server restarts with its store;
// MapMailboxes maps on every server; Traffic counts each server's
// messages; every server is gone after Shutdown.
func TestClusterBothWays(t *testing.T) {
	for _, mode := range bothWays(t) {
		t.Run(mode.name, func(t *testing.T) {
			t.Setenv(bustest.ServerEnv, mode.bin)
			c := bustest.NewCluster(t, 3)
			conn := c.Connect(t)
			ctx := context.Background()
			js := conn.JetStream()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEPT", Subjects: []string{"kept"}, Replicas: 3}); err != nil {
				t.Fatal(err)
			}
			leaderIs := func(want *bustest.ClusterServer) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					st, err := js.Stream(ctx, "KEPT")
					if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader == want.Name {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("StreamLeader = %s; the stream's info says otherwise (%v)", want.Name, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			leader := c.StreamLeader(t, "KEPT")
			leaderIs(leader)
			if c.MetaLeader(t) == nil {
				t.Fatal("no meta leader")
			}

			leader.Shutdown()
			if leader.Running() {
				t.Fatalf("%s runs after Shutdown", leader.Name)
			}
			next := c.StreamLeader(t, "KEPT")
			if next == leader {
				t.Fatalf("%s still leads KEPT after it stopped", leader.Name)
			}
			leaderIs(next)
			leader.Restart(t)
			if !leader.Running() {
				t.Fatalf("%s does not run after Restart", leader.Name)
			}

			names := conn.Names()
			c.MapMailboxes(t, names)
			ref := records.Ref{Kind: "counter", ID: "c1"}
			for _, s := range c.Servers {
				nc, err := nats.Connect(s.URL)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				sub, err := nc.SubscribeSync(names.StoredMailbox(ref))
				if err != nil {
					t.Fatal(err)
				}
				msg := nats.NewMsg(names.Mailbox(ref))
				msg.Header.Set("Nats-Expected-Stream", "NO_SUCH_STREAM") // not stored
				if err := nc.PublishMsg(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := sub.NextMsg(5 * time.Second); err != nil {
					t.Fatalf("%s: a publish to %s did not arrive as %s: %v", s.Name, names.Mailbox(ref), names.StoredMailbox(ref), err)
				}
				if tr := s.Traffic(); tr.InMsgs == 0 || tr.OutMsgs == 0 {
					t.Fatalf("%s: traffic %+v, want messages in and out", s.Name, tr)
				}
			}

			c.Shutdown()
			for _, s := range c.Servers {
				if nc, err := nats.Connect(s.URL, nats.NoReconnect(), nats.Timeout(time.Second)); err == nil {
					nc.Close()
					t.Fatalf("%s still accepts clients after Shutdown", s.URL)
				}
			}
		})
	}
}
