package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
)

// failBound is how long a failure may take, measured from outside: the
// target is about 2 s; this leaves room for a loaded CI machine.
const failBound = 5 * time.Second

// exe is the ea binary, built once per test that needs it.
type exe struct{ path string }

func buildEA(t *testing.T) exe {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ea")
	if err := proctest.Build(bin, "."); err != nil {
		t.Fatal(err)
	}
	return exe{path: bin}
}

// timed is one run of the binary: what it printed, its exit status and how
// long it took.
type timed struct {
	out, err string
	code     int
	took     time.Duration
}

// run runs the binary with args and env (nothing else of this process's
// environment), stdin as its standard input.
func (e exe) run(t *testing.T, env []string, stdin string, args ...string) timed {
	t.Helper()
	cmd := exec.Command(e.path, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := timed{out: out.String(), err: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run ea %v: %v", args, err)
	}
	return r
}

// rolesServerURL starts an embedded server with the shipped roles
// (deploy/nats/roles.conf), provisioned by the admin, and returns its URL.
// The client's password is client-pw.
func rolesServerURL(t *testing.T) string {
	t.Helper()
	for user, pw := range map[string]string{"CLIENT": "client-pw", "NODE": "node-pw", "SUPERVISOR": "supervisor-pw", "ADMIN": "admin-pw"} {
		t.Setenv("EA_"+user+"_PASSWORD", pw)
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ConfigFile: filepath.Join("..", "..", "deploy", "nats", "roles.conf")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	admin, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Options: []nats.Option{nats.UserInfo("admin", "admin-pw")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Close(); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

// TestFailsFast runs the built binary, as a person would, where it can only
// fail, with the default --timeout (10s): what the client role of
// deploy/nats does not open says "permission denied" (exit 1), and a server
// that refuses the connection is named with what to do (exit 4), each well
// within failBound.
func TestFailsFast(t *testing.T) {
	ea := buildEA(t)
	url := rolesServerURL(t)
	client := []string{"EA_NATS=" + url, "EA_USER=client", "EA_PASSWORD=client-pw"}

	for _, args := range [][]string{{"tail", "dead"}, {"top", "--once"}, {"orch", "ls"}, {"dead", "replay", "x"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := ea.run(t, client, "", args...)
			t.Logf("ea %s as client: exit %d after %v: %s", strings.Join(args, " "), r.code, r.took.Round(time.Millisecond), strings.TrimSpace(r.err))
			if r.code != exitError || !strings.Contains(r.err, "permission denied") {
				t.Errorf("exit %d, stderr %q; want 1 and permission denied", r.code, r.err)
			}
			if r.took > failBound {
				t.Errorf("took %v to fail; want under %v", r.took, failBound)
			}
		})
	}
	// Allowed commands are not taken for denied ones: state reads the
	// state bucket, which the client role opens.
	if r := ea.run(t, client, "", "state", "counter/x"); r.code != exitNotFound {
		t.Errorf("ea state as client: exit %d, stderr %q; want 3 (not found)", r.code, r.err)
	}

	// ea version connects to nothing: it answers where NATS is unreachable.
	t.Run("version", func(t *testing.T) {
		for _, args := range [][]string{{"version"}, {"--version"}} {
			r := ea.run(t, []string{"EA_NATS=nats://" + proctest.FreeAddr(t)}, "", args...)
			if r.code != 0 || !strings.HasPrefix(r.out, "ea ") || !strings.Contains(r.out, runtime.Version()) || r.took > failBound {
				t.Errorf("ea %v: exit %d after %v, %q %q", args, r.code, r.took, r.out, r.err)
			}
		}
		r := ea.run(t, nil, "", "version", "--json")
		var v versionInfo
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || !strings.HasPrefix(v.Version, "v") && !strings.HasPrefix(v.Version, "devel") {
			t.Errorf("ea version --json: %q (%v)", r.out, err)
		}
	})

	t.Run("connection refused", func(t *testing.T) {
		nowhere := "nats://" + proctest.FreeAddr(t)
		r := ea.run(t, []string{"EA_NATS=" + nowhere}, "", "state", "counter/x")
		t.Logf("ea state against %s: exit %d after %v: %s", nowhere, r.code, r.took.Round(time.Millisecond), strings.TrimSpace(r.err))
		if r.code != exitUnavailable {
			t.Errorf("exit %d; want 4", r.code)
		}
		for _, want := range []string{"cannot reach NATS at " + nowhere, "--nats"} {
			if !strings.Contains(r.err, want) {
				t.Errorf("stderr %q does not say %q", r.err, want)
			}
		}
		if r.took > failBound {
			t.Errorf("took %v to fail; want under %v", r.took, failBound)
		}
	})
}

// TestSendWaitAsClient: the client role may not read dead letters, so send
// --wait decides on the state document alone: a record it stopped at with
// an error was dead-lettered (exit 6); otherwise the record was processed,
// and ea says that it could not check the dead letters. Neither waits for a
// timeout.
func TestSendWaitAsClient(t *testing.T) {
	url := rolesServerURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{URL: url, Options: []nats.Option{nats.UserInfo("node", "node-pw")}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() }) // after the node stops (cleanups run last first)
	actortest.StartNode(t, conn, actor.Options{Logger: slog.New(slog.DiscardHandler)}, kinds.Counter())
	getenv := func(k string) string {
		return map[string]string{"EA_NATS": url, "EA_USER": "client", "EA_PASSWORD": "client-pw"}[k]
	}
	ea := func(args ...string) result {
		var out, errb bytes.Buffer
		start := time.Now()
		code := run(t.Context(), args, env{stdout: &out, stderr: &errb, getenv: getenv})
		if took := time.Since(start); took > failBound {
			t.Errorf("ea %v took %v", args, took)
		}
		return result{out: out.String(), err: errb.String(), code: code}
	}
	if r := ea("create", "counter/k1"); r.code != 0 {
		t.Fatalf("create as client: exit %d: %s", r.code, r.err)
	}
	r := ea("send", "counter/k1", `{"by":"x"}`, "--type", "inc", "--wait")
	if r.code != exitDead || !strings.Contains(r.err, "dead letters") || !strings.Contains(r.err, "Inc.by") {
		t.Errorf("bad payload as client: exit %d, stderr %q; want 6 with the state document's error", r.code, r.err)
	}
	r = ea("send", "counter/k1", `{"by":3}`, "--type", "inc", "--wait")
	if r.code != 0 || !strings.Contains(r.out, "processed") || !strings.Contains(r.out, `{"count":3}`) || !strings.Contains(r.err, "may not read dead letters") {
		t.Errorf("good payload as client: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}
