//go:build unix

package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
)

// TestWriterModelDown: the shipped writer kind with its model down (a base
// URL where nothing listens) applies the task and answers task.error; the
// ea binary's send --wait says the work failed, with the model's error, and
// exits 8 (failed), not 0.
func TestWriterModelDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	dir := t.TempDir()
	eaBinary := filepath.Join(dir, "ea")
	if err := proctest.Build(eaBinary, "../ea"); err != nil {
		t.Fatal(err)
	}
	down := "http://" + proctest.FreeAddr(t) + "/v1" // nothing listens there
	srv := bustest.NewServer(t)
	metrics := proctest.FreeAddr(t)
	n := startProcess(t, "node", metrics, binary, []string{"EA_LLM_BASE_URL=" + down, "EA_LLM_MODEL=m"}, "--nats", srv.URL, "--metrics", metrics)
	n.waitReady(t, 60*time.Second)

	run := func(args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, eaBinary, args...)
		cmd.Env = append(proctest.Environ("EA_"), "EA_NATS="+srv.URL)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ea %q: %v", args, err)
		}
		return out.String(), errb.String(), code
	}
	if out, errs, code := run("create", "writer/w1"); code != 0 {
		t.Fatalf("create: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code := run("send", "writer/w1", `{"input":"write a haiku about queues"}`, "--type", "task", "--process", "s1", "--wait")
	t.Logf("send --wait with the model down: exit %d: %s", code, strings.TrimSpace(errs))
	if code != 8 || out != "" {
		t.Fatalf("send --wait with the model down: exit %d, stdout %q, stderr %q; want exit 8 (failed) and nothing on stdout", code, out, errs)
	}
	for _, want := range []string{"the work failed", "task.error", "(code provider)", strings.TrimSuffix(down, "/v1")} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q does not say %q", errs, want)
		}
	}
	_ = n.Signal(syscall.SIGTERM)
	n.Wait(t, 30*time.Second)
}
