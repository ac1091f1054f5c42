package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/effectors/effectors/records"
)

func TestSendAckAndSubscribe(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	if _, err := e.actors.Create(ctx, c1, nil); err != nil {
		t.Fatal(err)
	}
	c := e.dial(t, nil)
	w := c.next("welcome", isType("welcome"))
	if num(w["version"]) != 1 {
		t.Fatalf("welcome: %v", w)
	}
	c.write(map[string]any{"type": "subscribe", "sub": "out", "topic": "outbox", "effector": "counter/c1"})
	c.next("subscribed", isType("subscribed"))
	c.write(map[string]any{"type": "send", "req": "r1", "to": "counter/c1",
		"record": map[string]any{"id": "rec-1", "type": "inc", "payload": map[string]any{"by": 2}}})
	ack := c.reply("r1")
	if ack["type"] != "ack" || ack["id"] != "rec-1" || num(ack["seq"]) == 0 || ack["duplicate"] == true {
		t.Fatalf("ack: %v", ack)
	}
	// Stored in JetStream at that sequence.
	stream, err := e.conn.JS.Stream(ctx, e.conn.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, num(ack["seq"]))
	if err != nil || msg.Header.Get(records.HeaderID) != "rec-1" {
		t.Fatalf("stored message at ack seq: %v %v", msg, err)
	}
	out := c.next("outbox record", isType("record"))
	rec := out["record"].(map[string]any)
	if rec["type"] != "count" || rec["cause"] != "rec-1" {
		t.Fatalf("outbox record: %v", out)
	}
	if j := rec["json"].(map[string]any); j["count"].(float64) != 2 {
		t.Fatalf("count: %v", j)
	}
	// Re-sending the same id stores nothing new.
	c.write(map[string]any{"type": "send", "req": "r2", "to": "counter/c1",
		"record": map[string]any{"id": "rec-1", "type": "inc", "payload": map[string]any{"by": 2}}})
	ack2 := c.reply("r2")
	if ack2["type"] != "ack" || ack2["duplicate"] != true || num(ack2["seq"]) != num(ack["seq"]) {
		t.Fatalf("re-send ack: %v (first %v)", ack2, ack)
	}
	doc, err := e.actors.StateAt(ctx, c1, num(ack["seq"]))
	if err != nil {
		t.Fatal(err)
	}
	var s kinds_counter
	if err := doc.Decode(&s); err != nil || s.Count != 2 {
		t.Fatalf("state %+v %v", s, err)
	}
	_ = time.Second
}

type kinds_counter struct {
	Count int64 `json:"count"`
}
