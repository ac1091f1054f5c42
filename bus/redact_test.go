package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@10.0.0.1:4222", "nats://alice:REDACTED@10.0.0.1:4222"},
		{"nats://t0ken@10.0.0.1:4222", "nats://REDACTED@10.0.0.1:4222"},
		{"tls://a:p%40ss@h:4222,nats://tok@h2:4222", "tls://a:REDACTED@h:4222,nats://REDACTED@h2:4222"},
		{"alice:s3cret@h:4222", "alice:REDACTED@h:4222"},
		{"nats://a:b c@d@h:4222", "nats://REDACTED@h:4222"},
		{"nats://u:%zz@h", "nats://REDACTED@h"},
	} {
		got := bus.RedactURL(tc.in)
		if got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, secret := range []string{"s3cret", "t0ken", "p%40ss", "tok@"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q keeps %q", tc.in, got, secret)
			}
		}
	}
}

// Refused credentials fail at once with ErrAuth, the URL redacted, instead of
// being retried for the whole connect timeout as "cannot reach".
func TestConnectAuthFailsFast(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, Username: "alice", Password: "right", NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	var logs strings.Builder
	start := time.Now()
	_, err = bus.Connect(context.Background(), bus.Config{
		URL:            "nats://alice:wr0ng-pw@" + srv.Addr().String(),
		ConnectTimeout: 20 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if !errors.Is(err, bus.ErrAuth) || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect with a wrong password: %v, want ErrAuth", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failed after %s: retried", d)
	}
	if strings.Contains(err.Error()+logs.String(), "wr0ng-pw") || !strings.Contains(err.Error(), "alice:REDACTED@") {
		t.Errorf("error %q / logs %q show the password or no redacted URL", err, logs.String())
	}
}
