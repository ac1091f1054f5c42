package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/effectors/effectors/web"
)

// TestProtocolDecisions covers what docs/gateway.md decides about the
// corners of the protocol: mailbox resume, from: 0, origin patterns.
func TestProtocolDecisions(t *testing.T) {
	e := newEnv(t, envOpts{})

	t.Run("ResumeMailboxNoGapNoDuplicate", func(t *testing.T) {
		ref := e.create(t, "mbox")
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "sub": "m", "topic": "mailbox", "effector": "counter/mbox", "from": 1})
		c.next("subscribed", isType("subscribed"))
		first := e.sendInc(t, ref, "inc", "", 3)
		var last uint64
		for i := range 3 {
			f := c.next("record", isType("record"))
			if id := f["record"].(map[string]any)["id"]; id != first[i].ID || num(f["seq"]) != first[i].Seq {
				t.Fatalf("mailbox record %d: %v, want %s at %d", i, f, first[i].ID, first[i].Seq)
			}
			last = num(f["seq"])
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		<-c.done
		more := e.sendInc(t, ref, "inc", "", 4) // while disconnected
		c2 := e.dial(t, nil)
		c2.write(map[string]any{"type": "subscribe", "sub": "m", "topic": "mailbox", "effector": "counter/mbox", "from": last + 1})
		c2.next("subscribed", isType("subscribed"))
		for i := range 4 {
			f := c2.next("record", isType("record"))
			if id := f["record"].(map[string]any)["id"]; id != more[i].ID {
				t.Fatalf("resumed mailbox record %d: %v, want %s (no gap, no duplicate)", i, f["record"], more[i].ID)
			}
		}
		sentinel := e.sendInc(t, ref, "inc", "", 1)
		if f := c2.next("record", isType("record")); f["record"].(map[string]any)["id"] != sentinel[0].ID {
			t.Fatalf("frame after the resumed ones: %v, want the sentinel", f["record"])
		}
	})

	t.Run("FromZeroIsFromNow", func(t *testing.T) {
		ref := e.create(t, "zero")
		before := e.sendInc(t, ref, "inc", "", 2) // and their outputs, before the subscription
		if _, err := e.actors.StateAt(context.Background(), ref, before[1].Seq); err != nil {
			t.Fatal(err)
		}
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "req": "s", "sub": "o", "topic": "outbox", "effector": "counter/zero", "from": 0})
		if f := c.reply("s"); f["type"] != "subscribed" {
			t.Fatalf("from 0: %v", f)
		}
		e.sendInc(t, ref, "inc", "", 1)
		f := c.next("record", isType("record"))
		if n := f["record"].(map[string]any)["json"].(map[string]any)["count"]; n != float64(3) {
			t.Fatalf("first record with from 0 has count %v, want 3 (what arrives after subscribing, as without from)", n)
		}
	})

	t.Run("OriginPatterns", func(t *testing.T) {
		e := e.withGateway(t, web.Config{Origins: []string{"app.example.com", "localhost:5173", "*.example.org", "dev.example.net:*"}})
		for _, tc := range []struct {
			origin string
			ok     bool
		}{
			{"https://app.example.com", true},
			{"HTTPS://APP.EXAMPLE.COM", true}, // case does not matter
			{"https://app.example.com:8443", false},
			{"http://localhost:5173", true},
			{"http://localhost:5174", false},
			{"http://localhost", false},
			{"https://a.example.org", true},
			{"https://example.org", false}, // *. does not cover the bare domain
			{"https://a.b.example.org", true},
			{"https://dev.example.net:3000", true},
			{"https://dev.example.net", false},
			{"https://evil.example.com", false},
		} {
			t.Run(tc.origin, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				ws, resp, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {tc.origin}}})
				if resp != nil && resp.Body != nil {
					_ = resp.Body.Close()
				}
				if ws != nil {
					defer ws.CloseNow()
				}
				switch {
				case tc.ok && err != nil:
					t.Fatalf("origin %s refused: %v", tc.origin, err)
				case !tc.ok && (err == nil || resp == nil || resp.StatusCode != http.StatusForbidden):
					t.Fatalf("origin %s: %v %v, want 403", tc.origin, fmt.Sprint(resp != nil && resp.StatusCode == 403), err)
				}
			})
		}
	})
}
