package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// actor.Client.Send in the same process (state check → PubAck).
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
	for _, withID := range []bool{false, true} {
		b.Run(fmt.Sprintf("gateway/client-id=%v", withID), func(b *testing.B) {
			c := e.dialNoRead(b, nil)
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
				if withID {
					rec["id"] = fmt.Sprintf("gw-%d-%d", run, next.Add(1))
				}
				frame, _ := json.Marshal(map[string]any{"type": "send", "req": "r", "to": "counter/bench", "record": rec})
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
