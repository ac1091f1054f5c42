package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/roles"
	"github.com/nats-io/nats.go"
)

// TestAuth runs ea against a server with the shipped least-privilege roles
// (deploy/nats/roles.conf): as user client with its password from
// EA_PASSWORD it reads a state document, and what the role does not open
// is refused as such; a wrong password or none is refused at once (exit 4,
// saying so); a password flag does not exist.
func TestAuth(t *testing.T) {
	url := rolesDeployment(t, filepath.Join("..", "..", "deploy", "nats", "roles.conf"), bus.Config{})
	ea := func(password string, args ...string) (string, int) { return eaWith(t, url, password, nil, args...) }
	if out, code := ea("c-pw", "state", "counter/x", "--user", "client"); code != exitNotFound || !strings.Contains(out, "not found") {
		t.Errorf("as client: exit %d, %q (want 3: connected, read the state bucket, no such effector)", code, out)
	}
	// What the client role does not open is refused, and said so.
	for _, args := range [][]string{{"orch", "ls"}, {"tail", "dead"}} {
		if out, code := ea("c-pw", append(args, "--user", "client", "--timeout", "300ms")...); code != exitError || !strings.Contains(out, "permission denied") {
			t.Errorf("as client, %v: exit %d, %q", args, code, out)
		}
	}
	if out, code := ea("wrong", "state", "counter/x", "--user", "client"); code != exitUnavailable || !strings.Contains(strings.ToLower(out), "authoriz") {
		t.Errorf("wrong password: exit %d, %q", code, out)
	}
	if out, code := ea("", "state", "counter/x"); code != exitUnavailable || !strings.Contains(strings.ToLower(out), "authoriz") {
		t.Errorf("no credentials: exit %d, %q", code, out)
	}
	if out, code := ea("", "state", "counter/x", "--user", "client"); code != exitUsage || !strings.Contains(out, "EA_PASSWORD") {
		t.Errorf("--user without a password: exit %d, %q", code, out)
	}
	if out, code := ea("", "state", "counter/x", "--password", "c-pw"); code != exitUsage || !strings.Contains(out, "-password") {
		t.Errorf("--password on the command line: exit %d, %q", code, out)
	}
}

// TestAuthStreamGroups runs ea as the least-privilege client on a
// deployment with stream groups, under the roles ea roles prints for it:
// the client may not read the mailbox streams, so ea cannot read the
// layout and must be given it (--stream-groups and --partitions, or
// EA_STREAM_GROUPS and EA_PARTITIONS); without them it is refused, saying
// what to give.
func TestAuthStreamGroups(t *testing.T) {
	r, err := roles.For(roles.Layout{Groups: 2, Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	var conf bytes.Buffer
	if err := r.WriteServerConfig(&conf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "roles.conf")
	if err := os.WriteFile(path, conf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	url := rolesDeployment(t, path, bus.Config{Groups: 2, Partitions: 8})
	as := func(user, password string, environ map[string]string, args ...string) (string, int) {
		return eaWith(t, url, password, environ, append(args, "--user", user)...)
	}
	ea := func(environ map[string]string, args ...string) (string, int) {
		return as("client", "c-pw", environ, args...)
	}
	// Told the layout, by flags or the environment: it reads the state
	// buckets (no such effector).
	for _, tc := range []struct {
		environ map[string]string
		args    []string
	}{
		{nil, []string{"state", "counter/x", "--stream-groups", "2", "--partitions", "8"}},
		{nil, []string{"--stream-groups=2", "--partitions", "8", "state", "counter/x"}},
		{map[string]string{"EA_STREAM_GROUPS": "2", "EA_PARTITIONS": "8"}, []string{"state", "counter/x"}},
	} {
		if out, code := ea(tc.environ, tc.args...); code != exitNotFound || !strings.Contains(out, "not found") {
			t.Errorf("as client, %v %v: exit %d, %q (want 3: read the group's state bucket, no such effector)", tc.environ, tc.args, code, out)
		}
	}
	// Not told: refused, saying what to give.
	out, code := ea(nil, "state", "counter/x")
	if code == exitNotFound || code == 0 || !strings.Contains(out, "--stream-groups") {
		t.Errorf("as client, not told the layout: exit %d, %q (want a refusal naming --stream-groups)", code, out)
	}
	// Told wrong, by a user that may read the layout (admin): refused,
	// naming the deployment's; one that may not (client) cannot be checked
	// and reads what the counts name, which its roles refuse.
	if out, code := as("admin", "a-pw", nil, "state", "counter/x", "--stream-groups", "4", "--partitions", "8"); code != exitUsage || !strings.Contains(out, "has 2 stream groups and 8 mailbox partitions") {
		t.Errorf("as admin, told 4 groups: exit %d, %q (want 2 naming the deployment's layout)", code, out)
	}
	if out, code := as("admin", "a-pw", nil, "state", "counter/x", "--stream-groups", "2", "--partitions", "8"); code != exitNotFound {
		t.Errorf("as admin, told the layout: exit %d, %q (want 3: no such effector)", code, out)
	}
	if out, code := ea(nil, "state", "counter/x", "--stream-groups", "4", "--partitions", "8"); code != exitError || !strings.Contains(out, "permission denied") {
		t.Errorf("as client, told 4 groups: exit %d, %q (want 1: permission denied)", code, out)
	}
	// Bad counts are usage errors naming what was wrong.
	for _, tc := range []struct {
		environ map[string]string
		args    []string
		want    string
	}{
		{nil, []string{"state", "counter/x", "--stream-groups", "0"}, "stream-groups"},
		{nil, []string{"state", "counter/x", "--partitions", "x"}, "partitions"},
		{map[string]string{"EA_STREAM_GROUPS": "two"}, []string{"state", "counter/x"}, "EA_STREAM_GROUPS"},
		{nil, []string{"state", "counter/x", "--stream-groups", "9", "--partitions", "8"}, "9"},
	} {
		if out, code := ea(tc.environ, tc.args...); code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("%v %v: exit %d, %q (want 2 naming %q)", tc.environ, tc.args, code, out, tc.want)
		}
	}
}

// rolesDeployment starts a server with the roles configuration config (the
// four users' passwords in its environment: client c-pw, admin a-pw) and
// provisions it as admin with cfg's layout; it returns the server's URL.
func rolesDeployment(t *testing.T, config string, cfg bus.Config) string {
	t.Helper()
	for user, pw := range map[string]string{"CLIENT": "c-pw", "NODE": "n", "SUPERVISOR": "s", "ADMIN": "a-pw"} {
		t.Setenv("EA_"+user+"_PASSWORD", pw)
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ConfigFile: config})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg.URL, cfg.Options = srv.ClientURL(), []nats.Option{nats.UserInfo("admin", "a-pw")}
	admin, err := bus.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

// eaWith runs ea against url with EA_PASSWORD password, EA_TIMEOUT 2s and
// environ as its environment; it returns what it printed and its exit
// status.
func eaWith(t *testing.T, url, password string, environ map[string]string, args ...string) (string, int) {
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "EA_PASSWORD":
			return password
		case "EA_TIMEOUT":
			return "2s"
		}
		return environ[k]
	}
	code := run(t.Context(), append(args, "--nats", url), env{stdout: &out, stderr: &errb, getenv: getenv})
	return out.String() + errb.String(), code
}
