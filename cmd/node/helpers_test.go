package main

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
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

// stateDoc is the state document as any msgpack reader sees it.
type stateDoc struct {
	ID     string         `msgpack:"id"`
	Kind   string         `msgpack:"kind"`
	Status string         `msgpack:"status"`
	State  map[string]any `msgpack:"state"`
	Seq    uint64         `msgpack:"seq"`
	Error  string         `msgpack:"error"`
}

// count returns state.count as an int64.
func (d stateDoc) count() int64 {
	switch v := d.State["count"].(type) {
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return int64(v)
	}
	return -1
}

// readState reads key from the state bucket and decodes it with msgpack.
func readState(ctx context.Context, kv jetstream.KeyValue, key string) (stateDoc, error) {
	ent, err := kv.Get(ctx, key)
	if err != nil {
		return stateDoc{}, err
	}
	var d stateDoc
	if err := msgpack.Unmarshal(ent.Value(), &d); err != nil {
		return stateDoc{}, fmt.Errorf("decode state %s: %w", key, err)
	}
	return d, nil
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
