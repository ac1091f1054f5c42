package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr returns a 127.0.0.1 address with a port free right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// httpClient never keeps connections, so no goroutine outlives a request.
var httpClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// get returns the status and body of GET url; status 0 if it cannot connect.
func get(url string) (int, string) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

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

// process is an ea-node child process.
type process struct {
	name    string
	cmd     *exec.Cmd
	metrics string // the --metrics address
	stdout  *syncBuffer
	stderr  *syncBuffer
	exited  chan struct{}
	err     error // of Wait, set when exited is closed
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
	p := &process{name: name, metrics: metrics, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s (%s %s) stdout:\n%s", name, filepath.Base(path), strings.Join(args, " "), tail(p.stdout.String(), 50))
			t.Logf("%s stderr:\n%s", name, tail(p.stderr.String(), 200))
		}
	})
	return p
}

// cleanEnv is this process's environment without EA_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EA_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) <= lines {
		return s
	}
	return fmt.Sprintf("[%d lines omitted]\n%s", len(all)-lines, strings.Join(all[len(all)-lines:], "\n"))
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitReady waits until /readyz answers 200.
func (p *process) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, p.name+" /readyz 200", func() bool {
		if !p.running() {
			t.Fatalf("%s exited before ready: %v", p.name, p.err)
		}
		code, _ := get("http://" + p.metrics + "/readyz")
		return code == http.StatusOK
	})
}

// wait waits for the process to exit and returns its exit code (-1 when
// killed by a signal).
func (p *process) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("%s: %v", p.name, p.err)
	}
	return p.cmd.ProcessState.ExitCode()
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
