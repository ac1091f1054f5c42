package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/internal/proctest"
)

func TestRunInProcess(t *testing.T) {
	srv := bustest.NewServer(t)
	metrics, gateway := proctest.FreeAddr(t), proctest.FreeAddr(t)
	var out, errOut proctest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats", srv.URL, "--metrics", metrics, "--gateway", gateway, "--log-format", "json"}, envOf(nil), &out, &errOut)
	}()
	actortest.Eventually(t, 30*time.Second, "the hint", func() bool { return strings.Contains(out.String(), "ea-supervisor is ready") })
	if !strings.Contains(out.String(), "gateway  http://"+gateway+"/") {
		t.Fatalf("the hint lacks the live view's URL:\n%s", out.String())
	}
	if code, body := proctest.Get("http://" + gateway + "/"); code != 200 || !strings.Contains(body, "<title>effectors console</title>") {
		t.Fatalf("live view: %d %.200s", code, body)
	}
	if code, body := proctest.Get("http://" + metrics + "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz %d %q", code, body)
	}
	if code, _ := proctest.Get("http://" + metrics + "/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, body := proctest.Get("http://" + metrics + "/metrics"); code != 200 || !strings.Contains(body, "ea_orchestration_conflicts_total 0") {
		t.Fatalf("/metrics %d:\n%s", code, grepLines(body, "ea_"))
	}
	if !strings.Contains(errOut.String(), `"msg":"supervisor ready"`) {
		t.Fatalf("logs are not JSON: %s", errOut.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return")
	}
}

func TestRunHelp(t *testing.T) {
	var out, errOut proctest.Buffer
	if err := run(context.Background(), []string{"-h"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Usage: ea-supervisor") || cli.ExitStatus("ea-supervisor", nil, &errOut) != 0 {
		t.Fatalf("help: %s", out.String())
	}
}

func TestRunNoNATS(t *testing.T) {
	var out, errOut proctest.Buffer
	err := run(context.Background(), []string{"--nats", "nats://" + proctest.FreeAddr(t), "--metrics", "off", "--connect-timeout", "300ms"}, envOf(nil), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "are the nodes running?") {
		t.Fatalf("run without NATS: %v", err)
	}
	var b strings.Builder
	if cli.ExitStatus("ea-supervisor", err, &b) != 1 || !strings.HasPrefix(b.String(), "ea-supervisor: ") {
		t.Fatalf("exit status message %q", b.String())
	}
}
