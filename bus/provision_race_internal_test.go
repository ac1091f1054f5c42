package bus

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestProvisionAdoptsAStreamCreatedMeanwhile: a connection that left the
// partition count unset and found no mailbox stream (the default, 64) meets
// one another process created meanwhile with 8: it adopts 8 instead of
// failing, and never updates the stream to its own count; a connection
// configured for 64 is refused with ErrInvalidConfig.
func TestProvisionAdoptsAStreamCreatedMeanwhile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	connect := func(cfg Config) *Conn {
		t.Helper()
		cfg.URL = srv.ClientURL()
		c, err := Connect(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	late := connect(Config{}) // as if its Adopt had run before the stream existed
	first := connect(Config{Partitions: 8})
	if err := first.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if late.Names().Partitions() != DefaultPartitions {
		t.Fatalf("late connection has %d partitions before provisioning, want the default", late.Names().Partitions())
	}
	if err := late.putStream(ctx, late.mailboxConfig()); !errors.Is(err, errProvisionedMeanwhile) {
		t.Fatalf("creating the mailbox stream over one with 8 partitions: %v, want errProvisionedMeanwhile", err)
	}
	// The checks before any stream is written see it too (the failure
	// `make test` met once: a node's provisioning and a test's, both
	// first, the test's with 8 partitions).
	if err := late.checkPartitions(ctx); !errors.Is(err, errProvisionedMeanwhile) {
		t.Fatalf("checkPartitions over a stream of 8 with the default taken: %v, want errProvisionedMeanwhile", err)
	}
	if err := late.checkGroups(ctx); !errors.Is(err, errProvisionedMeanwhile) {
		t.Fatalf("checkGroups over a stream of 8 with the default taken: %v, want errProvisionedMeanwhile", err)
	}
	if err := late.Provision(ctx); err != nil || late.Names().Partitions() != 8 {
		t.Fatalf("Provision: %v, %d partitions; want nil and 8", err, late.Names().Partitions())
	}
	fixed := connect(Config{Partitions: DefaultPartitions})
	if err := fixed.putStream(ctx, fixed.mailboxConfig()); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a connection configured for %d over a stream of 8: %v, want ErrInvalidConfig", DefaultPartitions, err)
	}
	for _, check := range []func(context.Context) error{fixed.checkPartitions, fixed.checkGroups} {
		if err := check(ctx); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("the checks of a connection configured for %d over a stream of 8: %v, want ErrInvalidConfig", DefaultPartitions, err)
		}
	}
	if err := fixed.Provision(ctx); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Provision configured for %d over a stream of 8: %v, want ErrInvalidConfig", DefaultPartitions, err)
	}
	s, err := first.JetStream().Stream(ctx, first.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.matchPartitions(s.CachedInfo().Config); err != nil {
		t.Fatalf("the mailbox stream changed: %v", err)
	}
}
