//go:build unix

// Package jsclient runs the tests of the JavaScript/TypeScript client
// (@effectors/client, this directory) from go test, so that make test runs
// them: it builds ea-node and ea-supervisor, then runs npm ci and npm test
// here, which start them (a real node with an embedded NATS, a real
// supervisor serving the gateway) and test the client against them, in
// Node and in headless Chromium. It has no Go code of its own.
package jsclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"
)

// TestJSClient runs npm ci and npm test in clients/js against binaries
// built from this tree, and checks that the bundle the live view embeds
// (web/assets/effectors-client.js) is the one the sources build.
func TestJSClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("JavaScript client tests skipped: %s not found (install Debian's nodejs and npm; CI does, see .ci/run)", tool)
		}
	}
	if v, err := exec.Command("node", "--version").Output(); err != nil || !nodeRecent(string(v)) {
		t.Skipf("JavaScript client tests skipped: Node.js %s is older than 20.19, which vite 7 and vitest 3 need (%v)", strings.TrimSpace(string(v)), err)
	}
	if testing.Short() {
		t.Skip("JavaScript client tests skipped in -short mode")
	}
	bin := t.TempDir()
	nodeBin, supBin := filepath.Join(bin, "ea-node"), filepath.Join(bin, "ea-supervisor")
	if err := proctest.Build(nodeBin, "../../cmd/node"); err != nil {
		t.Fatal(err)
	}
	if err := proctest.Build(supBin, "../../cmd/supervisor"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if installed() {
		t.Log("node_modules is as package-lock.json says: npm ci skipped")
	} else {
		npm(ctx, t, nil, "ci", "--no-audit", "--no-fund")
	}
	out := npm(ctx, t, []string{"EA_NODE_BIN=" + nodeBin, "EA_SUPERVISOR_BIN=" + supBin}, "test")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Tests ") || strings.Contains(line, "Test Files ") {
			t.Log(strings.TrimSpace(line))
		}
	}

	built, err := os.ReadFile("dist/effectors-client.js")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := os.ReadFile("../../web/assets/effectors-client.js")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, embedded) {
		t.Fatal("web/assets/effectors-client.js is not the bundle of clients/js/src: run npm run assets in clients/js and commit it")
	}
}

// npm runs npm with args in this directory, in its own process group
// (killed whole when ctx ends), and returns its output; it fails the test,
// with the output, when npm fails.
func npm(ctx context.Context, t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out proctest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("npm %s: %s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, proctest.Tail(out.String(), 200))
	}
	return out.String()
}

// installed reports whether node_modules was installed from the
// package-lock.json there is now: npm writes node_modules/.package-lock.json
// at every install, so a lock changed since is newer than it.
func installed() bool {
	lock, err := os.Stat("package-lock.json")
	if err != nil {
		return false
	}
	inst, err := os.Stat("node_modules/.package-lock.json")
	return err == nil && !lock.ModTime().After(inst.ModTime())
}

// nodeRecent reports whether `node --version` output v is 20.19 or later.
func nodeRecent(v string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimSpace(v), "v%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 20 || major == 20 && minor >= 19
}
