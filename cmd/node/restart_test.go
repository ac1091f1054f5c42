//go:build unix

package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/internal/proctest"
)

// TestQuickRestart: ea-node with its embedded server, stopped with SIGTERM
// and started again at once on the same ports and store (as a person does
// with Ctrl-C and the up arrow, or a process manager), comes up ready: the
// new process waits until the old one has released the store and its ports
// (its server writes every stream's and consumer's state to disk first,
// seconds with many partitions) instead of failing with "address already in
// use". The effector created before the restart is there after it. A second
// node started on the store of one that is running, not stopping, is still
// refused at once.
func TestQuickRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	listen, metrics, store := proctest.FreeAddr(t), proctest.FreeAddr(t), t.TempDir()
	args := []string{"--listen", listen, "--metrics", metrics, "--store", store, "--partitions", "64"}
	first := startNode(t, "first", metrics, args...)
	first.waitReady(t, 60*time.Second)
	nc, err := nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	createEffector(t, nc, "ea", "counter", "before")
	nc.Close()

	if err := first.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second := startNode(t, "second", metrics, args...)
	start := time.Now()
	if code := first.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("first node exited with %d after SIGTERM\n%s", code, proctest.Tail(first.Stderr.String(), 20))
	}
	// Once the first exited, only the second can answer on the metrics
	// address.
	second.waitReady(t, 60*time.Second)
	t.Logf("second node ready %s after the first got SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(second.Stderr.String(), "the previous node on this store is stopping") {
		t.Errorf("the second node did not say it waited for the first:\n%s", proctest.Tail(second.Stderr.String(), 20))
	}
	nc, err = nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg, err := nc.Request("ea.ctl.create.counter", []byte(`{"id":"before"}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "409" {
		t.Errorf("create counter/before after the restart: error code %q (%s), want 409: it exists from before", code, msg.Header.Get("Nats-Service-Error"))
	}

	// Not a restart: the store's node is running. Refused as before, at
	// once, not after a wait.
	third := startNode(t, "third", "", "--listen", proctest.FreeAddr(t), "--metrics", "off", "--store", store)
	begin := time.Now()
	if code := third.Wait(t, 10*time.Second); code == 0 {
		t.Fatal("a node on the store of a running node exited 0")
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("a node on the store of a running node took %s to be refused", took)
	}
	if !strings.Contains(third.Stderr.String(), "in use by pid") {
		t.Errorf("the third node's error does not say the store is in use:\n%s", proctest.Tail(third.Stderr.String(), 10))
	}

	if err := second.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := second.Wait(t, 60*time.Second); code != 0 {
		t.Errorf("second node exited with %d after SIGTERM", code)
	}
}
