package actor_test

import (
	"testing"
)

// TestNodeGoroutinesOnRecord: a running node's long-lived goroutines are
// on record by name, and none is left once Run returned.
func TestNodeGoroutinesOnRecord(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	n := startNode(t, conn, nil)
	got := n.Node.Goroutines()
	for _, name := range []string{"placement.watch-members", "placement.watch-leases", "placement.heartbeat",
		"placement.review", "placement.detect", "placement.reconciler", "placement.sweep", "node.watch"} {
		if got[name] != 1 {
			t.Errorf("goroutine %s: %d running, want 1 (all: %v)", name, got[name], got)
		}
	}
	n.Stop(t)
	if left := n.Node.Goroutines(); len(left) != 0 {
		t.Fatalf("after Run returned, still running: %v", left)
	}
}
