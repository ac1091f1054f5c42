package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/nats-io/nats.go"
)

// TestAuth runs ea against a server with the shipped least-privilege roles
// (deploy/nats/roles.conf): as user client with its password from
// EA_PASSWORD it reads a state document, and what the role does not open
// is refused as such; a wrong password or none is refused at once (exit 4,
// saying so); a password flag does not exist.
func TestAuth(t *testing.T) {
	for user, pw := range map[string]string{"CLIENT": "c-pw", "NODE": "n", "SUPERVISOR": "s", "ADMIN": "a-pw"} {
		t.Setenv("EA_"+user+"_PASSWORD", pw)
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ConfigFile: filepath.Join("..", "..", "deploy", "nats", "roles.conf")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	admin, err := bus.Connect(ctx, bus.Config{URL: srv.ClientURL(), Options: []nats.Option{nats.UserInfo("admin", "a-pw")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	admin.Close()

	ea := func(password string, args ...string) (string, int) {
		var out, errb bytes.Buffer
		getenv := func(k string) string {
			switch k {
			case "EA_PASSWORD":
				return password
			case "EA_TIMEOUT":
				return "2s"
			}
			return ""
		}
		code := run(t.Context(), append(args, "--nats", srv.ClientURL()), env{stdout: &out, stderr: &errb, getenv: getenv})
		return out.String() + errb.String(), code
	}
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
