//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
)

// TestConnectionClosedForGoodExits: when NATS closes the supervisor's
// connection for good (an error nats.go treats as final, injected by a
// proxy), ea-supervisor, gateway and all, exits non-zero saying why instead
// of serving on without NATS.
func TestConnectionClosedForGoodExits(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	srv := bustest.NewServer(t)
	proxy := proctest.StartNATSProxy(t, strings.TrimPrefix(srv.URL, "nats://"))
	sup := startSupervisor(t, "supervisor", proxy.URL())
	sup.waitReady(t, 30*time.Second)
	if n := proxy.Inject("-ERR 'injected fault'\r\n"); n == 0 {
		t.Fatal("the supervisor has no connection through the proxy")
	}
	if code := sup.Wait(t, 30*time.Second); code == 0 {
		t.Errorf("exit status %d after NATS closed the connection for good, want non-zero", code)
	}
	if out := sup.Stderr.String(); !strings.Contains(out, "nats closed the connection for good") || !strings.Contains(out, "injected fault") {
		t.Errorf("stderr does not say the connection was closed for good and why:\n%s", proctest.Tail(out, 20))
	}
}
