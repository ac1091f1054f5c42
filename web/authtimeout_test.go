package web_test

import (
	"testing"
	"time"

	"github.com/effectors/effectors/web"
)

// TestAuthFrameOutlivesAuthTimeout: a connection authorized by an auth
// frame stays open past AuthTimeout (the timer waiting for the auth frame
// stops once it came).
func TestAuthFrameOutlivesAuthTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e := newEnv(t, envOpts{cfg: web.Config{Token: "s3cret", AuthTimeout: timeout}})
	c := e.dial(t, nil)
	c.write(map[string]any{"type": "auth", "token": "s3cret"})
	c.next("welcome", isType("welcome"))
	// Nothing to poll for: the test is that nothing happens meanwhile.
	time.Sleep(3 * timeout)
	c.write(map[string]any{"type": "ping", "req": "p"})
	if f := c.reply("p"); f["type"] != "pong" {
		t.Fatalf("after %s: %v, want a pong", 3*timeout, f)
	}
}
