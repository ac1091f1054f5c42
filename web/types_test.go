package web_test

import (
	"strings"
	"testing"

	"github.com/effectors/effectors/web"
)

// TestSendUndeclaredType: counter declares "inc"; a send of another type
// (none given: "message") is refused with undeclared_type, naming the
// types and the fix, and nothing is stored; "any_type": true sends it.
func TestSendUndeclaredType(t *testing.T) {
	e := newEnv(t, envOpts{})
	ref := e.create(t, "u1")
	c := e.dial(t, nil)
	c.next("welcome", isType("welcome"))
	for _, typ := range []string{"", "dec"} {
		c.write(map[string]any{"type": "send", "req": "r-" + typ, "to": ref.String(),
			"record": map[string]any{"type": typ, "payload": map[string]any{"by": 1}}})
		f := c.reply("r-" + typ)
		msg, _ := f["error"].(string)
		if f["type"] != "error" || f["code"] != web.CodeUndeclaredType || !strings.Contains(msg, "handles record types inc") || !strings.Contains(msg, "any_type") {
			t.Fatalf("send of type %q: %v, want %s naming the types and any_type", typ, f, web.CodeUndeclaredType)
		}
	}
	doc, err := e.actors.State(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	c.write(map[string]any{"type": "send", "req": "any", "to": ref.String(), "any_type": true,
		"record": map[string]any{"payload": map[string]any{"by": 1}}})
	ack := c.reply("any")
	if ack["type"] != "ack" {
		t.Fatalf("send with any_type: %v", ack)
	}
	// The refused sends stored nothing: the record sent anyway is the
	// first the effector sees after its creation.
	after, err := e.actors.StateAt(t.Context(), ref, num(ack["seq"]))
	if err != nil {
		t.Fatal(err)
	}
	if after.Seq != num(ack["seq"]) || doc.Seq != 0 {
		t.Fatalf("seq %d before, %d after; the ack's %d", doc.Seq, after.Seq, num(ack["seq"]))
	}
	c.write(map[string]any{"type": "send", "req": "inc", "to": ref.String(),
		"record": map[string]any{"type": "inc", "payload": map[string]any{"by": 1}}})
	if f := c.reply("inc"); f["type"] != "ack" {
		t.Fatalf("send of type inc: %v", f)
	}
}
