package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
)

// TestGatewayStreamGroups: a gateway on a deployment with 3 stream groups
// sends to and follows effectors of several groups (the ack names the
// effector's group's mailbox stream, the outbox and mailbox topics read the
// effector's group's streams), finds records in the record store, counts
// every partition in the node view, and refuses the kind-wide outbox and
// state topics with "from" (one stream's sequence), saying what to do
// instead (resuming with positions: TestGatewayResumePositions).
func TestGatewayStreamGroups(t *testing.T) {
	e := newEnv(t, envOpts{groups: 3})
	n := e.conn.Names()
	groups := map[int]bool{}
	var refs []records.Ref
	for i := 0; len(refs) < 3 || len(groups) < 2; i++ {
		if i == 24 {
			t.Fatalf("24 counters all in group(s) %v", groups)
		}
		ref := e.create(t, fmt.Sprint("g", i))
		refs = append(refs, ref)
		groups[n.GroupOf(ref)] = true
	}
	c := e.dial(t, nil)
	c.next("welcome", isType("welcome"))
	for i, ref := range refs {
		sub := fmt.Sprint("out", i)
		c.write(map[string]any{"type": "subscribe", "sub": sub, "topic": "outbox", "effector": ref.String()})
		c.next("subscribed", func(f map[string]any) bool { return f["type"] == "subscribed" && f["sub"] == sub })
		req, id := fmt.Sprint("s", i), fmt.Sprint("rec-", i)
		c.write(map[string]any{"type": "send", "req": req, "to": ref.String(),
			"record": map[string]any{"id": id, "type": "inc", "payload": map[string]any{"by": 2}}})
		ack := c.reply(req)
		if ack["type"] != "ack" || ack["stream"] != n.MailboxStreamFor(ref) || num(ack["seq"]) == 0 {
			t.Fatalf("ack of a send to %s (group %d): %v, want stream %s", ref, n.GroupOf(ref), ack, n.MailboxStreamFor(ref))
		}
		out := c.next("outbox record of "+ref.String(), func(f map[string]any) bool { return f["type"] == "record" && f["sub"] == sub })
		if rec := out["record"].(map[string]any); rec["type"] != "count" || rec["cause"] != id {
			t.Fatalf("outbox record of %s: %v", ref, out)
		}
		// The mailbox topic from its first record, and the record by id.
		msub := fmt.Sprint("mbox", i)
		c.write(map[string]any{"type": "subscribe", "sub": msub, "topic": "mailbox", "effector": ref.String(), "from": 1})
		in := c.next("mailbox record of "+ref.String(), func(f map[string]any) bool { return f["type"] == "record" && f["sub"] == msub })
		if rec := in["record"].(map[string]any); rec["id"] != id {
			t.Fatalf("mailbox record of %s: %v", ref, in)
		}
		actortest.Eventually(t, 15*time.Second, id+" in the record store", func() bool {
			greq := "g" + id
			c.write(map[string]any{"type": "get", "req": greq, "id": id})
			return c.reply(greq)["type"] == "result"
		})
	}
	for _, sub := range []map[string]any{
		{"type": "subscribe", "sub": "kind-outbox-from", "topic": "outbox", "kind": "counter", "from": 3},
		{"type": "subscribe", "sub": "kind-state-from", "topic": "state", "kind": "counter", "from": 3},
	} {
		c.write(sub)
		if f := c.next("refusal of "+sub["sub"].(string), func(f map[string]any) bool { return f["type"] == "error" && f["sub"] == sub["sub"] }); f["code"] != "bad_request" || !strings.Contains(fmt.Sprint(f["error"]), "stream groups") {
			t.Fatalf("%v with groups: %v", sub, f)
		}
	}
	// The kind-wide outbox topic from now: the outputs of every counter,
	// whatever its group.
	c.write(map[string]any{"type": "subscribe", "sub": "kind-outbox", "topic": "outbox", "kind": "counter"})
	c.next("subscribed", func(f map[string]any) bool { return f["type"] == "subscribed" && f["sub"] == "kind-outbox" })
	for _, ref := range refs {
		e.sendInc(t, ref, "inc", "", 1)
	}
	outs := map[string]bool{}
	for len(outs) < len(refs) {
		f := c.next("an output of every counter", func(f map[string]any) bool { return f["type"] == "record" && f["sub"] == "kind-outbox" })
		outs[fmt.Sprint(f["record"].(map[string]any)["from"])] = true
	}
	for _, ref := range refs {
		if !outs[ref.String()] {
			t.Fatalf("kind-wide outbox topic: no output of %s (saw %v)", ref, outs)
		}
	}
	// The kind-wide state topic from now: the current document of every
	// counter, whatever its group.
	c.write(map[string]any{"type": "subscribe", "sub": "kind-state", "topic": "state", "kind": "counter"})
	seen := map[string]bool{}
	for len(seen) < len(refs) {
		f := c.next("state of every counter", func(f map[string]any) bool { return f["type"] == "state" && f["sub"] == "kind-state" })
		seen[fmt.Sprint(f["effector"])] = true
	}
	for _, ref := range refs {
		if !seen[ref.String()] {
			t.Fatalf("kind-wide state topic: no state of %s (saw %v)", ref, seen)
		}
	}
	// One effector's state topic reads its group's bucket.
	c.write(map[string]any{"type": "subscribe", "sub": "st", "topic": "state", "effector": refs[0].String()})
	if f := c.next("state of "+refs[0].String(), func(f map[string]any) bool { return f["type"] == "state" && f["sub"] == "st" }); f["effector"] != refs[0].String() {
		t.Fatalf("state frame: %v", f)
	}
	// The node view counts every partition, each in its group's stream.
	parts := n.Partitions()
	actortest.Eventually(t, 30*time.Second, "the node view with every counter partition counted", func() bool {
		c.write(map[string]any{"type": "nodes", "req": "n"})
		f := c.reply("n")
		if f["type"] != "result" {
			t.Fatalf("nodes: %v", f)
		}
		nodes := f["result"].(map[string]any)["nodes"].([]any)
		if len(nodes) != 1 {
			return false
		}
		counter, done := 0, uint64(0)
		for _, p := range nodes[0].(map[string]any)["partitions"].([]any) {
			p := p.(map[string]any)
			if p["kind"] != "counter" {
				continue
			}
			if p["error"] != nil {
				t.Fatalf("partition %v", p)
			}
			counter++
			done += num(p["done"])
		}
		return counter == parts && done >= uint64(len(refs))
	})
}
