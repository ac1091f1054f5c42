package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/proctest"
)

// TestBinary runs ea as a built binary, as a person would: exit statuses
// reach the shell, a payload comes on a pipe, EA_NATS configures it, and an
// interrupt (SIGINT) ends tail --follow with status 0.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ea")
	if err := proctest.Build(bin, "."); err != nil {
		t.Fatal(err)
	}
	w := startWorld(t)
	envNATS := []string{"EA_NATS=" + w.url, "PATH=/usr/bin:/bin"}

	// exe runs ea to completion with stdin and returns stdout, stderr and
	// the exit status.
	exe := func(stdin string, env []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return out.String(), errb.String(), 0
		case errors.As(err, &ee):
			return out.String(), errb.String(), ee.ExitCode()
		}
		t.Fatalf("run ea %v: %v", args, err)
		return "", "", -1
	}

	if out, _, code := exe("", nil, "--help"); code != 0 || !strings.Contains(out, "Usage: ea") {
		t.Errorf("ea --help: exit %d, %q", code, out)
	}
	if _, errs, code := exe("", nil, "frob"); code != exitUsage || !strings.Contains(errs, `unknown command "frob"`) {
		t.Errorf("ea frob: exit %d, %q", code, errs)
	}
	if _, errs, code := exe("", nil, "state", "counter/x", "--nats", "nats://"+proctest.FreeAddr(t), "--timeout", "500ms"); code != exitUnavailable || !strings.Contains(errs, "cannot reach NATS") {
		t.Errorf("ea state against nothing: exit %d, %q", code, errs)
	}
	if _, _, code := exe("", envNATS, "create", "counter/b1"); code != 0 {
		t.Fatalf("ea create: exit %d", code)
	}
	if out, errs, code := exe(`{"by":7}`, envNATS, "send", "counter/b1", "--type", "inc", "--wait", "--json"); code != 0 {
		t.Fatalf("ea send from a pipe: exit %d: %s %s", code, out, errs)
	} else {
		var doc actor.Document
		var s kinds.CounterState
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Decode(&s) != nil || s.Count != 7 {
			t.Errorf("ea send --wait --json printed %q (%v)", out, err)
		}
	}
	if _, errs, code := exe("", envNATS, "state", "counter/nobody"); code != exitNotFound || !strings.Contains(errs, "not found") {
		t.Errorf("ea state of nobody: exit %d, %q", code, errs)
	}

	p := proctest.Start(t, "ea tail", bin, []string{"tail", "outbox", "counter/b1", "--follow", "--poll", "50ms"}, envNATS)
	p.WaitOutput(t, 20*time.Second, `{"count":7}`)
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("ea tail --follow after SIGINT: exit %d; stderr %q", code, p.Stderr.String())
	}
}
