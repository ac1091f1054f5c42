package bustest_test

import (
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
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
