package web_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/effectors/effectors/web"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  web.Config
		want string // "" valid
	}{
		{"zero value", web.Config{}, ""},
		{"loopback v4", web.Config{Addr: "127.0.0.2:1"}, ""},
		{"loopback v6", web.Config{Addr: "[::1]:1"}, ""},
		{"localhost", web.Config{Addr: "localhost:1"}, ""},
		{"all interfaces with a token", web.Config{Addr: ":9466", Token: "t"}, ""},
		{"all interfaces without a token", web.Config{Addr: ":9466"}, "not a loopback address: set a users file (--gateway-users) or a token"},
		{"all interfaces with users", web.Config{Addr: ":9466", UsersFile: "/etc/ea/users"}, ""},
		{"huge token", web.Config{Token: strings.Repeat("t", web.MaxToken+1)}, "at most"},
		{"origin with a port", web.Config{Origins: []string{"localhost:5173", "localhost:*"}}, ""},
		{"bad origin pattern", web.Config{Origins: []string{"[a-"}}, "path.Match syntax"},
		{"public without a token", web.Config{Addr: "0.0.0.0:9466"}, "not a loopback address"},
		{"no port", web.Config{Addr: "127.0.0.1"}, "want host:port"},
		{"token with space", web.Config{Token: "a b"}, "white space"},
		{"origin with scheme", web.Config{Origins: []string{"https://x.example"}}, "without scheme"},
		{"tiny frame", web.Config{MaxFrame: 10}, "max frame"},
		{"tiny buffer", web.Config{SendBuffer: 10}, "send buffer"},
		{"negative duration", web.Config{SlowReader: -time.Second}, "durations must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, web.ErrInvalid)):
				t.Fatalf("got %v, want an ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	if _, err := web.New(context.Background(), nil, web.Config{}); !errors.Is(err, web.ErrInvalid) {
		t.Fatalf("New with a nil conn: %v", err)
	}
}

// testRunAndStop serves a gateway with Run on a free port and stops it:
// open connections are closed with 1001 and a reason, and Run returns nil.
func testRunAndStop(t *testing.T, e *env) {
	gw, err := web.New(context.Background(), e.conn, web.Config{Addr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := gw.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	c := (&env{url: "ws://" + addr.String() + "/ws"}).dial(t, nil)
	c.next("welcome", isType("welcome"))
	// A second gateway on the same address fails to listen, clearly.
	other, err := web.New(context.Background(), e.conn, web.Config{Addr: addr.String(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Listen(); err == nil || !strings.Contains(err.Error(), "listen on "+addr.String()) {
		t.Fatalf("second listener: %v", err)
	}
	other.Close()
	cancel()
	if ce := c.closed(); ce.Code != websocket.StatusGoingAway || ce.Reason != "gateway stopping" {
		t.Fatalf("close %v", ce)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
}
