package supervisord

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// TestCommandStreamGroups: on a deployment with stream groups the binary
// serves orchestrations and its gateway (on by default), taking the layout
// from what is provisioned.
func TestCommandStreamGroups(t *testing.T) {
	srv := bustest.NewServer(t)
	srv.MapPartitions(t, 8)
	conn := srv.Connect(t, bus.Config{Partitions: 8, Groups: 2})
	def, err := demo.Definition()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	ready := make(chan Info, 1)
	cmd := Command{Name: "ea-supervisor", Definitions: []supervisor.Definition{def},
		Banner: func(in Info) string { ready <- in; return "" }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cmd.Run(ctx, []string{"--nats", srv.URL, "--metrics", "off", "--gateway", "127.0.0.1:0"}, envOf(nil), &out, &errOut)
	}()
	select {
	case in := <-ready:
		if g := in.Names.Groups(); g != 2 || in.Gateway == "" {
			t.Errorf("the supervisor adopted %d groups (want 2), gateway %q", g, in.Gateway)
		}
	case err := <-done:
		t.Fatalf("ea-supervisor stopped before it was ready: %v\n%s", err, errOut.String())
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		t.Fatalf("ea-supervisor not ready within 30s: %s", errOut.String())
	}
	c, err := supervisor.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	// It answers (the orchestrations themselves run in the supervisor
	// package's TestDemoStreamGroups, with workers).
	if _, err := c.Status(ctx, records.NewID()); !errors.Is(err, supervisor.ErrUnknownOrchestration) {
		t.Fatalf("status of an unknown orchestration: %v, want ErrUnknownOrchestration", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ea-supervisor: %v", err)
	}
}
