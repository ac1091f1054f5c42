//go:build unix

package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats-server/v2/server"
)

// authServer starts a NATS server with JetStream that requires user alice
// with password pw, or the token tok when user is empty.
func authServer(t *testing.T, user, secret string) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	if user != "" {
		opts.Username, opts.Password = user, secret
	} else {
		opts.Authorization = secret
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("auth server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.Addr().String()
}

// A password or token in the NATS URL is never printed (log lines, the
// ready banner), and a wrong password fails at once with an auth error
// instead of being retried as "cannot reach".
func TestSecretsNotPrinted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	t.Run("wrong password fails fast", func(t *testing.T) {
		addr := authServer(t, "alice", "right-pw-1")
		start := time.Now()
		p := startNode(t, "node", "", "--nats", "nats://alice:wrong-pw-2@"+addr, "--metrics", proctest.FreeAddr(t))
		if code := p.Wait(t, 8*time.Second); code == 0 {
			t.Fatal("ea-node with a wrong password exited 0")
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("a wrong password took %s to fail, want well under the 10s connect timeout", d)
		}
		out := p.Stdout.String() + p.Stderr.String()
		if strings.Contains(out, "wrong-pw-2") {
			t.Errorf("output shows the password:\n%s", out)
		}
		if !strings.Contains(strings.ToLower(out), "authorization violation") || !strings.Contains(out, "check the credentials") {
			t.Errorf("output does not say the credentials were refused:\n%s", out)
		}
		if strings.Contains(out, "cannot reach") {
			t.Errorf("an auth failure was retried as \"cannot reach\":\n%s", out)
		}
	})
	for _, tc := range []struct{ name, user, secret, url string }{
		{"password", "alice", "pw-s3cret-3", "nats://alice:pw-s3cret-3@"},
		{"token", "", "tok-s3cret-4", "nats://tok-s3cret-4@"},
	} {
		t.Run(tc.name+" in the ready banner", func(t *testing.T) {
			addr := authServer(t, tc.user, tc.secret)
			metrics := proctest.FreeAddr(t)
			p := startNode(t, "node", metrics, "--nats", tc.url+addr, "--metrics", metrics, "--partitions", "4")
			p.waitReady(t, 30*time.Second)
			p.WaitOutput(t, 10*time.Second, "is ready")
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			p.Wait(t, 20*time.Second)
			out := p.Stdout.String() + p.Stderr.String()
			if strings.Contains(out, tc.secret) {
				t.Errorf("output shows the secret %q:\n%s", tc.secret, out)
			}
			if !strings.Contains(p.Stdout.String(), "REDACTED@"+addr) {
				t.Errorf("banner does not show the redacted URL:\n%s", p.Stdout)
			}
		})
	}
	t.Run("unreachable server", func(t *testing.T) {
		addr := proctest.FreeAddr(t) // nothing listens
		p := startNode(t, "node", "", "--nats", "nats://bob:pw-s3cret-5@"+addr, "--metrics", proctest.FreeAddr(t))
		p.Wait(t, 15*time.Second)
		out := p.Stdout.String() + p.Stderr.String()
		if strings.Contains(out, "pw-s3cret-5") {
			t.Errorf("output shows the password:\n%s", out)
		}
		if !strings.Contains(out, "cannot reach nats yet") {
			t.Errorf("no \"cannot reach\" line:\n%s", out)
		}
	})
}
