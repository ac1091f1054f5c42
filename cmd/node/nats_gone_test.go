package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
)

// TestStopsPromptlyWithoutNATS: a node asked to stop (SIGTERM) while its
// NATS server is gone does not wait the shutdown grace for records in hand
// that cannot finish without NATS: it says so and exits within a few
// seconds (twice, before, it took more than 20s; 6s now, most of it the rest of the process shutting down). The bound is a liveness
// check, far above what the exit takes, not a performance figure.
func TestStopsPromptlyWithoutNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	srv := bustest.NewServer(t)
	metrics := proctest.FreeAddr(t)
	node := startNode(t, "node", metrics, "--nats", srv.URL, "--metrics", metrics, "--store", t.TempDir(), "--shutdown-grace", "30s")
	node.waitReady(t, 30*time.Second)
	srv.Shutdown()
	eventually(t, 30*time.Second, "the node to see NATS gone", func() bool {
		_, body := proctest.Get("http://" + metrics + "/metrics")
		return strings.Contains(body, `ea_nats_connection_state{state="reconnecting"} 1`)
	})
	asked := time.Now()
	if err := node.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := node.Wait(t, 20*time.Second)
	took := time.Since(asked)
	t.Logf("exited with %d %s after SIGTERM", code, took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("took %s to exit without NATS, with a 30s shutdown grace: the grace must not be waited for records that cannot finish", took)
	}
	if out := node.Stderr.String(); !strings.Contains(out, "stopping while NATS is out of reach") {
		t.Errorf("stderr does not say records in hand are left for the next reader:\n%s", proctest.Tail(out, 20))
	}
}
