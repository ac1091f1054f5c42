package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/internal/proctest"
)

// TestRunInProcess runs the node in this process against a test server:
// /readyz goes from 503 to 200, the hint names the server and prefix, and
// cancelling ctx shuts everything down (goleak checks nothing is left).
// Not parallel: a whole node in this process with a 200ms heartbeat (a
// 600ms TTL) and a 30s deadline to be ready; a parallel test starves it.
func TestRunInProcess(t *testing.T) {
	srv := bustest.NewServer(t)
	metrics := proctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr proctest.Buffer
	done := make(chan error, 1)
	args := []string{"--nats", srv.URL, "--metrics", metrics, "--prefix", "t1", "--log-level", "debug", "--log-format", "json",
		"--node-id", "n-1", "--heartbeat", "200ms", "--idle", "off"}
	go func() { done <- run(ctx, args, envOf(nil), &stdout, &stderr) }()
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", proctest.Tail(stderr.String(), 100))
		}
	}()

	eventually(t, 30*time.Second, "/readyz 200", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		default:
		}
		code, _ := proctest.Get("http://" + metrics + "/readyz")
		return code == http.StatusOK
	})
	eventually(t, 5*time.Second, "the hint", func() bool { return strings.Contains(stdout.String(), "curl") })
	for _, want := range []string{
		"export EA_NATS=" + srv.URL,
		"export EA_PREFIX=t1",
		"bin/ea create counter/c1",
		"export NATS_URL=" + srv.URL,
		`nats req t1.ctl.create.counter '{"id":"c1"}'`,
		"nats kv get t1_state counter.c1",
		"nats sub 't1.out.counter.c1'",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("hint lacks %q:\n%s", want, stdout.String())
		}
	}
	// /readyz answers once the node is ready; its log line may follow a
	// moment later.
	eventually(t, 5*time.Second, "a JSON log line of the node being ready", func() bool {
		return strings.Contains(stderr.String(), `"msg":"node ready"`)
	})
	// --node-id reaches placement: the node heartbeats under its name.
	conn := srv.Connect(t)
	place, err := conn.JetStream().KeyValue(ctx, "t1_place")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := place.Get(ctx, "node.n-1"); err != nil {
		t.Errorf("placement bucket t1_place, key node.n-1 (--node-id n-1): %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of cancel")
	}
	if code, _ := proctest.Get("http://" + metrics + "/healthz"); code != 0 {
		t.Errorf("/healthz answers %d after run returned", code)
	}
}

// TestRunNotReadyUntilConnected checks /readyz says why it is not ready while
// NATS cannot be reached, and that stopping then is clean.
func TestRunNotReadyUntilConnected(t *testing.T) {
	t.Parallel()
	metrics := proctest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr proctest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats", "nats://" + proctest.FreeAddr(t), "--metrics", metrics}, envOf(nil), &stdout, &stderr)
	}()
	var body string
	eventually(t, 10*time.Second, "/readyz 503", func() bool {
		var code int
		code, body = proctest.Get("http://" + metrics + "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if body != "connecting to NATS\n" {
		t.Errorf("/readyz body %q, want the reason", body)
	}
	if code, _ := proctest.Get("http://" + metrics + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d while connecting, want 200", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run stopped while connecting: %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return within 15s of cancel")
	}
}

// TestRunMetricsAddressInUse checks that a busy --metrics address fails at
// once with an error naming the flag.
func TestRunMetricsAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	var stdout, stderr proctest.Buffer
	err = run(context.Background(), []string{"--metrics", addr, "--nats", "nats://" + proctest.FreeAddr(t)}, envOf(nil), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--metrics "+addr) {
		t.Fatalf("run = %v, want an error naming --metrics %s", err, addr)
	}
	var msg strings.Builder
	if code := cli.ExitStatus("ea-node", err, &msg); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.HasPrefix(msg.String(), "ea-node: --metrics "+addr) {
		t.Errorf("reported %q", msg.String())
	}
}

// TestRunHelp checks -h prints the usage to stdout and succeeds.
func TestRunHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr proctest.Buffer
	if err := run(context.Background(), []string{"-h"}, envOf(nil), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "Usage: ea-node") || stderr.String() != "" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
}
