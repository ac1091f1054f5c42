// Package proctest runs real processes in tests, in the manner of httptest:
// build a binary once per test binary, start it with arguments and an
// environment while capturing its output, wait for a line of output or for
// an HTTP endpoint to answer, signal it and wait for its exit status. Every
// process started is killed at the test's cleanup if still running, and its
// output logged if the test failed.
//
// # Usage
//
//	bin := filepath.Join(dir, "ea-node")
//	if err := proctest.Build(bin, "."); err != nil { ... } // in TestMain
//
//	addr := proctest.FreeAddr(t)
//	p := proctest.Start(t, "node", bin, []string{"--metrics", addr}, proctest.Environ("EA_"))
//	p.WaitHTTP(t, 30*time.Second, "http://"+addr+"/readyz")
//	if err := p.Signal(syscall.SIGTERM); err != nil { t.Fatal(err) }
//	code := p.Wait(t, 30*time.Second)
//
// It is a test helper package: its functions take a testing.TB and fail the
// test on errors of the harness itself.
package proctest

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for a writer and readers at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Build compiles the Go package pkg (a path as go build takes it, such as
// ".") into the binary out, with the race detector when this binary runs
// with it. It is meant for TestMain, so it returns an error instead of
// taking a testing.TB; the compiler's output goes to os.Stderr.
//
// When the environment variable PROCTEST_BINARIES names a directory that
// holds a binary of pkg built the same way (its build information names
// the same main package and the same -race setting), out becomes a link to
// it instead: make test builds ea-node, ea-supervisor and ea once there for
// every package whose tests run them, instead of once per package. Whoever
// sets the variable keeps those binaries current.
func Build(out, pkg string) error {
	if out == "" || pkg == "" {
		return errors.New("proctest: Build needs an output path and a package, such as Build(filepath.Join(dir, \"bin\"), \".\")")
	}
	goBin, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		return fmt.Errorf("proctest: find the go command: %w", err)
	}
	if dir := os.Getenv(EnvBinaries); dir != "" {
		if bin, ok := prebuilt(goBin, dir, pkg); ok {
			if err := os.Symlink(bin, out); err != nil {
				return fmt.Errorf("proctest: link the prebuilt %s: %w", bin, err)
			}
			return nil
		}
	}
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("proctest: go build %s: %w", pkg, err)
	}
	return nil
}

// EnvBinaries is the environment variable naming a directory of prebuilt
// binaries for [Build].
const EnvBinaries = "PROCTEST_BINARIES"

// prebuilt returns the binary in dir built from pkg with this test binary's
// race setting, named after the last element of pkg's import path, and
// false when there is none.
func prebuilt(goBin, dir, pkg string) (string, bool) {
	b, err := exec.Command(goBin, "list", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		return "", false
	}
	importPath := strings.TrimSpace(string(b))
	bin, err := filepath.Abs(filepath.Join(dir, path.Base(importPath)))
	if err != nil {
		return "", false
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil || info.Path != importPath {
		return "", false
	}
	race := false
	for _, s := range info.Settings {
		if s.Key == "-race" {
			race = s.Value == "true"
		}
	}
	return bin, race == raceEnabled
}

// handedOut are the addresses FreeAddr returned in this test binary: the
// kernel may give a port it just gave again once its listener is closed,
// and a process started with two of them (--metrics and --gateway) then
// fails to bind the second (seen in CI). The one piece of shared state of
// this package, guarded by handedMu.
var (
	handedMu  sync.Mutex
	handedOut = map[string]bool{}
)

// FreeAddr returns a 127.0.0.1 address with a port free right now, and
// never one it returned before in this test binary.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		handedMu.Lock()
		seen := handedOut[addr]
		handedOut[addr] = true
		handedMu.Unlock()
		if !seen {
			return addr
		}
	}
	t.Fatal("proctest: no port free that was not handed out before in 100 tries")
	return ""
}

// Environ is this process's environment without the variables whose name
// starts with any of prefixes.
func Environ(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		drop := false
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				drop = true
				break
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// Proc is a started child process.
type Proc struct {
	Name   string    // as given to Start, for messages
	Cmd    *exec.Cmd // the command; do not call its Wait
	Stdout *Buffer   // what the process wrote to stdout so far
	Stderr *Buffer   // what the process wrote to stderr so far
	exited chan struct{}
	err    error // of Cmd.Wait, set when exited is closed
}

// Start starts path with args and the environment env (the complete
// environment; nil inherits this process's). The process is killed at the
// test's cleanup if still running, and the tail of its output logged if the
// test failed.
func Start(t testing.TB, name, path string, args, env []string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Stdout: &Buffer{}, Stderr: &Buffer{}, exited: make(chan struct{})}
	p.Cmd = exec.Command(path, args...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s (%s %s) stdout:\n%s", name, filepath.Base(path), strings.Join(args, " "), Tail(p.Stdout.String(), 50))
			t.Logf("%s stderr:\n%s", name, Tail(p.Stderr.String(), 200))
		}
	})
	return p
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err is the error of the process's exit (nil for status 0, an
// *exec.ExitError otherwise); nil while it runs.
func (p *Proc) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error {
	return p.Cmd.Process.Signal(sig)
}

// Wait waits for the process to exit and returns its exit status (-1 when
// killed by a signal), failing the test after timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.Name, timeout)
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("%s: %v", p.Name, p.err)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// WaitOutput waits until the process's stdout contains s, failing the test
// if it exits first or after timeout.
func (p *Proc) WaitOutput(t testing.TB, timeout time.Duration, s string) {
	t.Helper()
	poll(t, timeout, fmt.Sprintf("%s to print %q", p.Name, s), func() bool {
		if !p.Running() {
			t.Fatalf("%s exited: %v\n%s", p.Name, p.err, p.Stderr)
		}
		return strings.Contains(p.Stdout.String(), s)
	})
}

// WaitHTTP waits until GET url answers 200, failing the test if the process
// exits first or after timeout.
//
// On the timeout it first asks a Go process for its goroutines (SIGQUIT)
// and keeps the whole of its stderr in a file whose path the test logs: the
// answer to "what was it waiting for" in a failed CI run.
func (p *Proc) WaitHTTP(t testing.TB, timeout time.Duration, url string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if !p.Running() {
			t.Fatalf("%s exited before ready: %v", p.Name, p.err)
		}
		if code, _ := Get(url); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			p.dumpStacks(t)
			t.Fatalf("timed out after %s waiting for %s %s 200", timeout, p.Name, url)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dumpStacks sends SIGQUIT (a Go program prints every goroutine's stack to
// stderr and exits), waits a little for it, and writes the process's whole
// stderr to a file in the system's temporary directory, which outlives the
// test's own.
func (p *Proc) dumpStacks(t testing.TB) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
	f, err := os.CreateTemp("", "proctest-"+p.Name+"-*.stderr")
	if err != nil {
		t.Logf("keep %s's stderr: %v", p.Name, err)
		return
	}
	defer f.Close()
	if _, err := io.WriteString(f, p.Stderr.String()); err != nil {
		t.Logf("keep %s's stderr: %v", p.Name, err)
		return
	}
	t.Logf("%s's goroutines (SIGQUIT) and whole stderr: %s", p.Name, f.Name())
}

// poll calls cond every 20ms until it holds, failing the test after timeout.
func poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Get returns the status and body of GET url, or status 0 and the error if
// it cannot connect. It keeps no connection, so no goroutine outlives it.
func Get(url string) (int, string) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
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

// Tail is the last lines of s, with a note of how many were left out.
func Tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) <= lines {
		return s
	}
	return fmt.Sprintf("[%d lines omitted]\n%s", len(all)-lines, strings.Join(all[len(all)-lines:], "\n"))
}
