package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
)

// eventually polls cond every 20ms until it holds, failing the test after
// timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// process is an ea-node child process with its --metrics address.
type process struct {
	*proctest.Proc
	metrics string // the --metrics address
}

// startNode starts the ea-node binary with args, with no EA_* variable of
// this process inherited. metrics is the --metrics address given in args
// (empty if none). The process is killed at cleanup if still running, and
// its output logged if the test failed.
func startNode(t testing.TB, name, metrics string, args ...string) *process {
	t.Helper()
	return startProcess(t, name, metrics, binary, nil, args...)
}

// startProcess starts path with args and, beyond this process's environment
// without EA_* variables, env. The rest is as for startNode.
func startProcess(t testing.TB, name, metrics, path string, env []string, args ...string) *process {
	t.Helper()
	return &process{Proc: proctest.Start(t, name, path, args, append(proctest.Environ("EA_"), env...)), metrics: metrics}
}

// waitReady waits until /readyz answers 200.
func (p *process) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.WaitHTTP(t, timeout, "http://"+p.metrics+"/readyz")
}

// createEffector creates kind/id through the control endpoint with a plain
// NATS request, failing the test on an error reply.
func createEffector(t testing.TB, nc *nats.Conn, prefix, kind, id string) {
	t.Helper()
	msg, err := nc.Request(prefix+".ctl.create."+kind, []byte(`{"id":"`+id+`"}`), 10*time.Second)
	if err != nil {
		t.Fatalf("create %s/%s: %v", kind, id, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("create %s/%s: error %s: %s", kind, id, code, msg.Header.Get("Nats-Service-Error"))
	}
}

// envOf is a getenv reading m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// outputIDOf matches the id of output n of the record with id cause:
// <cause>:<n>.<tag>, the tag 20 hex digits (see actor.Context).
func outputIDOf(cause, n string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(cause+":"+n+".") + `[0-9a-f]{20}$`)
}
