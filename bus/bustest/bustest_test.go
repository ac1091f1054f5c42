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

// TestServerBothWays runs a server embedded and as a process of its own
// (the nats-server binary ServerEnv names, or one built from go.mod's
// version when it names none): each serves JetStream, keeps its URL and
// its store across Restart, maps mailboxes after MapMailboxes, and is gone
// after Shutdown.
func TestServerBothWays(t *testing.T) {
	bin := os.Getenv(bustest.ServerEnv)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "nats-server")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			t.Fatalf("build nats-server: %v\n%s", err, out)
		}
	}
	for _, mode := range []struct{ name, bin string }{{"embedded", ""}, {"process", bin}} {
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
