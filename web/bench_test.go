package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/web"
)

// BenchmarkSend measures one record sent and acknowledged at a time: over
// the gateway (WebSocket frame → state check → PubAck → ack frame), with
// and without a client-chosen id (which adds the record store lookup that
// makes re-sends safe past the duplicate window), against the baseline of
// actor.Client.Send in the same process (state check → PubAck), and as a
// user of a users file (ownership check and EA-Owner).
func BenchmarkSend(b *testing.B) {
	e := newEnv(b, envOpts{cfg: web.Config{}})
	ctx := context.Background()
	run := time.Now().UnixNano() // ids unique across runs of the loop
	var next atomic.Int64
	c1 := records.Ref{Kind: "counter", ID: "bench"}
	if _, err := e.actors.Create(ctx, c1, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("baseline=actor.Client.Send", func(b *testing.B) {
		rec, err := records.NewJSON("inc", map[string]int{"by": 1})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rec.ID = fmt.Sprintf("base-%d-%d", run, next.Add(1))
			if _, err := e.actors.Send(ctx, c1, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("store.Client.Get(missing id)", func(b *testing.B) {
		sc, err := store.NewClient(ctx, e.conn)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sc.Get(ctx, fmt.Sprintf("missing-%d-%d", run, next.Add(1))); !errors.Is(err, store.ErrNotFound) {
				b.Fatal(err)
			}
		}
	})
	// A user's send: its identity is checked against the effector's owner
	// (from the same state read as the existing check) and set as EA-Owner.
	dir := b.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("alice user "+web.HashToken("alice-bench")+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	owned := records.Ref{Kind: "counter", ID: "bench-alice"}
	if _, err := e.actors.CreateOwned(ctx, owned, nil, "alice"); err != nil {
		b.Fatal(err)
	}
	eu := e.withGateway(b, web.Config{UsersFile: users})
	for _, tc := range []struct {
		name   string
		e      *env
		hdr    http.Header
		to     string
		withID bool
	}{
		{"gateway/client-id=false", e, nil, "counter/bench", false},
		{"gateway/client-id=true", e, nil, "counter/bench", true},
		{"gateway/user,client-id=false", eu, http.Header{"Authorization": {"Bearer alice-bench"}}, "counter/bench-alice", false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.e.dialNoRead(b, tc.hdr)
			read := func() map[string]any {
				_, data, err := c.ws.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var f map[string]any
				if err := json.Unmarshal(data, &f); err != nil {
					b.Fatal(err)
				}
				return f
			}
			if f := read(); f["type"] != "welcome" {
				b.Fatalf("first frame %v", f)
			}
			for b.Loop() {
				rec := map[string]any{"type": "inc", "payload": map[string]int{"by": 1}}
				if tc.withID {
					rec["id"] = fmt.Sprintf("gw-%d-%d", run, next.Add(1))
				}
				frame, _ := json.Marshal(map[string]any{"type": "send", "req": "r", "to": tc.to, "record": rec})
				if err := c.ws.Write(ctx, websocket.MessageText, frame); err != nil {
					b.Fatal(err)
				}
				if f := read(); f["type"] != "ack" || f["duplicate"] == true {
					b.Fatalf("reply %v", f)
				}
			}
		})
	}
}
