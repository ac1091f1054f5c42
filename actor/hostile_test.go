package actor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestHostileInput is the hostile-input suite of a node: control requests
// and records a hostile or careless client sends, on one server and one
// node. Every case asserts the exact answer (code, reason and a part of the
// text, or the dead-letter reason and a part of EA-Error), that nothing was
// lost (every record stored is applied once or is a dead letter, the
// counts say so), and that the node still serves another effector
// afterwards.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	node := startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	bystander, target := ref("counter", "bystander"), ref("counter", "h1")
	for _, r := range []records.Ref{bystander, target} {
		if _, err := c.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	served := int64(0)
	// stillServes checks that the node still processes another effector's
	// records.
	stillServes := func(t *testing.T) {
		t.Helper()
		served++
		rawPublish(t, conn, bystander, map[string]string{"EA-Type": "inc", "Content-Type": records.ContentJSON}, []byte(`{}`))
		waitCount(t, conn, c, bystander, served, 10*time.Second)
	}
	t.Run("control", func(t *testing.T) { hostileControl(t, conn, c, node, stillServes) })
	t.Run("records", func(t *testing.T) { hostileRecords(t, conn, c, target, stillServes) })
}

// ctlReply is a control reply as a plain NATS client reads it.
type ctlReply struct {
	code, reason, text string
	data               []byte
}

func ctlRequest(t *testing.T, conn *bus.Conn, subject string, body []byte) ctlReply {
	t.Helper()
	msg, err := conn.NATS().Request(subject, body, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: no reply: %v", subject, err)
	}
	return ctlReply{msg.Header.Get("Nats-Service-Error-Code"), msg.Header.Get("EA-Error-Reason"), msg.Header.Get("Nats-Service-Error"), msg.Data}
}

func hostileControl(t *testing.T, conn *bus.Conn, c *actor.Client, node *runningNode, stillServes func(*testing.T)) {
	ctx := ctxT(t)
	names := conn.Names()
	gone, junk := ref("counter", "gone"), ref("counter", "junk")
	if _, err := c.Create(ctx, gone, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Terminate(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, junk, nil); err != nil {
		t.Fatal(err)
	}
	putJunk(t, conn, junk, []byte("junk"))
	// A copy of another effector's document under its key (finding 1).
	copied := ref("counter", "copied")
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(ctx, names.StateKey(ref("counter", "bystander")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Put(ctx, names.StateKey(copied), ent.Value()); err != nil {
		t.Fatal(err)
	}

	long := func(n int) string { return strings.Repeat("x", n) }
	ctl := func(op string) string { return names.Control(op, "counter") }
	cases := []struct {
		name, subject, body string
		code, reason        string // "" code: success
		text                []string
	}{
		// Bodies that are not one JSON object of the request's fields.
		{"empty body", ctl("create"), ``, "400", "invalid", []string{"bad request body: empty", `want JSON like {"id": "c1", "state": {...}}`}},
		{"null body", ctl("terminate"), `null`, "400", "invalid", []string{"not a JSON object"}},
		{"array body", ctl("state"), `[{"id":"h1"}]`, "400", "invalid", []string{"not a JSON object"}},
		{"string body", ctl("activate"), `"h1"`, "400", "invalid", []string{"not a JSON object"}},
		{"unknown field", ctl("create"), `{"id":"n1","colour":"x"}`, "400", "invalid", []string{`unknown field "colour"`}},
		{"owner with a space", ctl("create"), `{"id":"n1","owner":"a b"}`, "400", "invalid", []string{"EA-Owner"}},
		{"field in another case", ctl("create"), `{"ID":"n1"}`, "400", "invalid", []string{`unknown field "ID": field names are case-sensitive ("id")`}},
		{"field twice", ctl("reset"), `{"id":"h1","id":"bystander"}`, "400", "invalid", []string{`field "id" given twice`}},
		{"two objects", ctl("create"), `{"id":"n1"} {"id":"n2"}`, "400", "invalid", []string{"data after the JSON object"}},
		{"trailing junk", ctl("terminate"), `{"id":"h1"}]`, "400", "invalid", []string{"data after the JSON object"}},
		{"truncated", ctl("create"), `{"id":"n1"`, "400", "invalid", []string{"unexpected EOF"}},
		{"id a number", ctl("state"), `{"id":7}`, "400", "invalid", []string{"cannot unmarshal number"}},
		{"invalid UTF-8", ctl("create"), "{\"id\":\"\xff\xfe\"}", "400", "invalid", []string{"id"}},
		{"900 KB unknown field", ctl("create"), `{"` + long(900_000) + `":1}`, "400", "invalid", []string{"it is 900006 bytes: at most 524288 are taken"}},
		{"500 KB unknown field", ctl("create"), `{"` + long(500_000) + `":1}`, "400", "invalid", []string{`unknown field "` + long(64) + `"… (500000 bytes)`}},
		{"huge body", ctl("reset"), `{"id":"h1","state":{"count":1,"pad":"` + long(600_000) + `"}}`, "400", "invalid", []string{"it is 600", "at most 524288"}},
		{"long unknown field", ctl("terminate"), `{"` + long(1000) + `":1}`, "400", "invalid", []string{`unknown field "` + long(64) + `"… (1000 bytes)`}},
		// Ids that are not one subject token.
		{"empty id", ctl("create"), `{"id":""}`, "400", "invalid", []string{"id"}},
		{"id with a dot", ctl("create"), `{"id":"a.b"}`, "400", "invalid", []string{`"a.b"`}},
		{"id *", ctl("create"), `{"id":"*"}`, "400", "invalid", []string{`"*"`}},
		{"id >", ctl("activate"), `{"id":">"}`, "400", "invalid", []string{`">"`}},
		{"id with a space", ctl("terminate"), `{"id":"a b"}`, "400", "invalid", []string{`"a b"`}},
		{"id 129 bytes", ctl("create"), `{"id":"` + long(129) + `"}`, "400", "invalid", []string{"129"}},
		{"id non-ASCII", ctl("state"), `{"id":"caf\u00e9"}`, "400", "invalid", []string{"caf"}},
		{"id 300 KB", ctl("state"), `{"id":"` + long(300_000) + `"}`, "400", "invalid", []string{"300000"}},
		// States that do not fit the kind.
		{"state a string", ctl("create"), `{"id":"n1","state":"lots"}`, "400", "invalid", []string{"state"}},
		{"state of the wrong type", ctl("create"), `{"id":"n1","state":{"count":"3"}}`, "400", "invalid", []string{"count"}},
		{"state an array", ctl("reset"), `{"id":"h1","state":[1,2]}`, "400", "invalid", []string{"state"}},
		{"state overflows", ctl("create"), `{"id":"n1","state":{"count":1e400}}`, "400", "invalid", []string{"1e400"}},
		// Effectors that are not there, or not in a state to do it.
		{"create existing", ctl("create"), `{"id":"h1"}`, "409", "exists", []string{"effector counter/h1 already exists (status IDLE)"}},
		{"terminate unknown", ctl("terminate"), `{"id":"ghost"}`, "404", "not_found", []string{"effector counter/ghost not found"}},
		{"reset unknown", ctl("reset"), `{"id":"ghost"}`, "404", "not_found", []string{"effector counter/ghost not found: create it"}},
		{"state unknown", ctl("state"), `{"id":"ghost"}`, "404", "not_found", []string{"effector counter/ghost not found"}},
		{"activate unknown", ctl("activate"), `{"id":"ghost"}`, "404", "not_found", []string{"effector counter/ghost not found: create it"}},
		{"reset terminated", ctl("reset"), `{"id":"gone"}`, "410", "terminated", []string{"a terminated effector stays terminated"}},
		{"activate terminated", ctl("activate"), `{"id":"gone"}`, "410", "terminated", []string{"effector counter/gone is terminated"}},
		{"create terminated", ctl("create"), `{"id":"gone"}`, "409", "exists", []string{"already exists (status TERMINATED)"}},
		{"terminate terminated", ctl("terminate"), `{"id":"gone"}`, "", "", nil},
		{"state of junk", ctl("state"), `{"id":"junk"}`, "409", "corrupt_state", []string{"is corrupt", "reset it with nats req ea.ctl.reset.counter"}},
		{"activate junk", ctl("activate"), `{"id":"junk"}`, "409", "corrupt_state", []string{"is corrupt"}},
		{"state of a copied document", ctl("state"), `{"id":"copied"}`, "409", "corrupt_state", []string{"state document does not match its key"}},
		{"terminate a copied document", ctl("terminate"), `{"id":"copied"}`, "409", "corrupt_state", []string{"reset it with"}},
		{"activate a copied document", ctl("activate"), `{"id":"copied"}`, "409", "corrupt_state", []string{"counter.copied"}},
		{"create over junk", ctl("create"), `{"id":"junk"}`, "409", "exists", []string{"already exists, but its state document counter.junk", "is corrupt"}},
		// Kinds no node hosts, and internal subjects called directly.
		{"kind nobody hosts", names.Control("create", "nokind"), `{"id":"n1"}`, "503", "no_host", []string{`no node hosts kind "nokind"`}},
		{"kind nobody hosts, junk body", names.Control("activate", "nokind"), `junk`, "503", "no_host", []string{`no node hosts kind "nokind"`}},
		{"state of a kind nobody hosts", names.Control("state", "nokind"), `{"id":"n1"}`, "404", "not_found", []string{"effector nokind/n1 not found"}},
		{"kind too long", names.Control("create", long(129)), `{"id":"n1"}`, "400", "invalid", []string{"129"}},
		{"host subject, junk", names.HostControl("create", "counter"), `{"id":1}`, "400", "invalid", []string{"cannot unmarshal number"}},
		{"host subject, bad id", names.HostControl("terminate", "counter"), `{"id":"a.b"}`, "400", "invalid", []string{`"a.b"`}},
		{"node subject, junk", names.NodeControl(node.ID(), "activate", "counter"), `{"id":"h1","x":1}`, "400", "invalid", []string{`unknown field "x"`}},
		{"node subject, unknown", names.NodeControl(node.ID(), "activate", "counter"), `{"id":"ghost"}`, "404", "not_found", []string{"ghost"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, err := c.State(ctx, ref("counter", "h1"))
			if err != nil {
				t.Fatal(err)
			}
			got := ctlRequest(t, conn, tc.subject, []byte(tc.body))
			if got.code != tc.code || got.reason != tc.reason {
				t.Fatalf("code %q reason %q (%.300s), want %q %q", got.code, got.reason, got.text, tc.code, tc.reason)
			}
			if len(got.text) > 1100 || strings.Contains(got.text, long(65)) {
				t.Fatalf("error text of %d bytes echoes the request: %.200s", len(got.text), got.text)
			}
			for _, part := range tc.text {
				if !strings.Contains(got.text, part) {
					t.Errorf("error %.400q does not say %q", got.text, part)
				}
			}
			if tc.code == "" && len(got.data) == 0 {
				t.Errorf("empty reply")
			}
			// Nothing was created or changed by a refused request.
			for _, id := range []string{"n1", "n2", "ghost", "a", "b"} {
				if _, err := c.State(ctx, ref("counter", id)); !errors.Is(err, actor.ErrNotFound) {
					t.Fatalf("counter/%s: %v, want ErrNotFound", id, err)
				}
			}
			after, err := c.State(ctx, ref("counter", "h1"))
			if err != nil || after.Status != before.Status || string(after.State) != string(before.State) {
				t.Fatalf("counter/h1 changed: %+v → %+v (%v)", before, after, err)
			}
			stillServes(t)
		})
	}

	// The Go client turns every code and reason back into the typed error.
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"create existing", func() error { _, err := c.Create(ctx, ref("counter", "h1"), nil); return err }, actor.ErrExists},
		{"state of junk via activate", func() error { _, err := c.Activate(ctx, junk); return err }, actor.ErrCorruptState},
		{"activate unknown", func() error { _, err := c.Activate(ctx, ref("counter", "ghost")); return err }, actor.ErrNotFound},
		{"activate terminated", func() error { _, err := c.Activate(ctx, gone); return err }, actor.ErrTerminated},
		{"reset terminated", func() error { _, err := c.Reset(ctx, gone, nil); return err }, actor.ErrTerminated},
		{"create a kind nobody hosts", func() error { _, err := c.Create(ctx, ref("nokind", "x"), nil); return err }, actor.ErrNoHost},
		{"state that does not fit", func() error { _, err := c.Create(ctx, ref("counter", "n1"), "lots"); return err }, actor.ErrInvalid},
	} {
		err := tc.call()
		var ce *actor.ControlError
		if !errors.Is(err, tc.want) || !errors.As(err, &ce) || ce.Reason == "" {
			t.Errorf("%s: %v, want %v as a *ControlError with a reason", tc.name, err, tc.want)
		}
		for _, other := range []error{actor.ErrInvalid, actor.ErrNotFound, actor.ErrExists, actor.ErrTerminated, actor.ErrNoHost, actor.ErrCorruptState, actor.ErrNotLoaded} {
			if other != tc.want && errors.Is(err, other) {
				t.Errorf("%s: %v also matches %v", tc.name, err, other)
			}
		}
	}
}

// recordCase is a record sent to the target's mailbox and what must become
// of it.
type recordCase struct {
	name    string
	subject string // "" for the target's mailbox
	header  nats.Header
	body    string
	// One of: "ok" (applied: the count goes up by one), "dead" (a dead
	// letter with reason and a part of EA-Error), "refused" (JetStream does
	// not store it: the publish fails), "duplicate" (JetStream drops it as
	// a duplicate of an earlier record).
	outcome string
	deadOf  records.Ref // whose dead letters: the target's when zero
	reason  string
	errText string
}

func hostileRecords(t *testing.T, conn *bus.Conn, c *actor.Client, target records.Ref, stillServes func(*testing.T)) {
	ctx := ctxT(t)
	names := conn.Names()
	long := func(n int) string { return strings.Repeat("x", n) }
	h := func(kv ...string) nats.Header {
		out := nats.Header{"EA-Type": {"inc"}, "Content-Type": {records.ContentJSON}}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
				continue
			}
			out[kv[i]] = []string{kv[i+1]}
		}
		return out
	}
	dupID := "hostile-dup-" + records.NewID()
	cases := []recordCase{
		{name: "a good record", header: h(), body: `{}`, outcome: "ok"},
		// EA-Type at and past its limits.
		{name: "EA-Type of 128", header: h("EA-Type", long(128)), body: `{}`, outcome: "dead", reason: "rejected", errText: "unknown record type"},
		{name: "EA-Type of 129", header: h("EA-Type", long(129)), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Type"},
		{name: "EA-Type of 65,300", header: h("EA-Type", long(65_300)), body: `{}`, outcome: "dead", reason: "decode", errText: "65300 characters"},
		{name: "EA-Type with a space", header: h("EA-Type", "in c"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Type"},
		{name: "EA-Type absent", header: h("EA-Type", ""), body: `{}`, outcome: "dead", reason: "rejected", errText: `"message"`},
		{name: "EA-Type twice", header: nats.Header{"EA-Type": {"inc", "zap"}, "Content-Type": {records.ContentJSON}}, body: `{}`, outcome: "ok"},
		// Ids, processes and causes.
		{name: "Nats-Msg-Id of 256", header: h("Nats-Msg-Id", "i"+long(255)), body: `{}`, outcome: "ok"},
		{name: "Nats-Msg-Id of 257", header: h("Nats-Msg-Id", "j"+long(256)), body: `{}`, outcome: "dead", reason: "decode", errText: "Nats-Msg-Id"},
		{name: "Nats-Msg-Id non-ASCII", header: h("Nats-Msg-Id", "caf\u00e9-"+records.NewID()), body: `{}`, outcome: "dead", reason: "decode", errText: "Nats-Msg-Id"},
		{name: "a record id", header: h("Nats-Msg-Id", dupID), body: `{}`, outcome: "ok"},
		{name: "the same record id again", header: h("Nats-Msg-Id", dupID), body: `{"by":100}`, outcome: "duplicate"},
		{name: "EA-Process of 256", header: h("EA-Process", long(256)), body: `{}`, outcome: "ok"},
		{name: "EA-Process of 257", header: h("EA-Process", long(257)), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Process"},
		{name: "EA-Process with a tab", header: h("EA-Process", "p\t1"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Process"},
		{name: "EA-Cause of 257", header: h("EA-Cause", long(257)), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Cause"},
		{name: "EA-From without a slash", header: h("EA-From", "counter"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-From"},
		{name: "EA-From with a bad id", header: h("EA-From", "counter/a.b"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-From"},
		// EA-Reply: where the node would publish.
		{name: "EA-Reply of 512 to an inbox", header: h("EA-Reply", "_INBOX."+long(505)), body: `{}`, outcome: "ok"},
		{name: "EA-Reply of 513", header: h("EA-Reply", "_INBOX."+long(506)), body: `{}`, outcome: "dead", reason: "decode", errText: "513 bytes"},
		{name: "EA-Reply a wildcard", header: h("EA-Reply", "_INBOX.*"), body: `{}`, outcome: "dead", reason: "decode", errText: "wildcard token *"},
		{name: "EA-Reply an empty token", header: h("EA-Reply", "_INBOX..x"), body: `{}`, outcome: "dead", reason: "decode", errText: "an empty token"},
		{name: "EA-Reply to the KV API", header: h("EA-Reply", "$KV.ea_state.counter.bystander"), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "NATS system subject"},
		{name: "EA-Reply to purge the mailboxes", header: h("EA-Reply", "$JS.API.STREAM.PURGE.EA_MBOX"), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "NATS system subject"},
		{name: "EA-Reply to the state endpoint", header: h("EA-Reply", names.Control("state", "counter")), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "a control subject"},
		{name: "EA-Reply to activate", header: h("EA-Reply", names.NodeControl("n", "activate", "counter")), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "a control subject"},
		{name: "EA-Reply to another outbox", header: h("EA-Reply", names.Outbox(ref("counter", "bystander"))), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "the outbox of another effector"},
		{name: "EA-Reply to the store", header: h("EA-Reply", names.Store("query")), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "a runtime subject"},
		{name: "EA-Reply not allowed", header: h("EA-Reply", "elsewhere.x"), body: `{}`, outcome: "dead", reason: "reply_forbidden", errText: "not in the allowed reply subjects"},
		// Priority, time and content type.
		{name: "EA-Priority high", header: h("EA-Priority", "high"), body: `{}`, outcome: "ok"},
		{name: "EA-Priority urgent", header: h("EA-Priority", "urgent"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Priority"},
		{name: "EA-Time valid", header: h("EA-Time", "2026-01-02T15:04:05.123456789Z"), body: `{}`, outcome: "ok"},
		{name: "EA-Time yesterday", header: h("EA-Time", "yesterday"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Time"},
		{name: "EA-Time year 10000", header: h("EA-Time", "10000-01-01T00:00:00Z"), body: `{}`, outcome: "dead", reason: "decode", errText: "EA-Time"},
		{name: "Content-Type text", header: h("Content-Type", "text/plain"), body: `{}`, outcome: "dead", reason: "decode", errText: "Content-Type"},
		{name: "Content-Type absent, JSON body", header: h("Content-Type", ""), body: `{"by":1}`, outcome: "dead", reason: "decode", errText: "invalid application/msgpack payload"},
		// Payloads.
		{name: "payload not JSON", header: h(), body: `{"by":`, outcome: "dead", reason: "decode", errText: "invalid application/json payload"},
		{name: "payload of the wrong type", header: h(), body: `{"by":"two"}`, outcome: "dead", reason: "decode", errText: "by"},
		{name: "payload just under the kind's 256 KiB", header: h(), body: `{"by":1}` + strings.Repeat(" ", 262_144-8), outcome: "ok"},
		{name: "payload one byte over the kind's 256 KiB", header: h(), body: `{"by":1}` + strings.Repeat(" ", 262_144-7), outcome: "dead", reason: "oversize", errText: "payload of 262145 bytes exceeds the 262144 bytes kind counter accepts"},
		{name: "payload 900 KB of JSON", header: h(), body: `{"by":1}` + strings.Repeat(" ", 900_000), outcome: "dead", reason: "oversize", errText: "payload of 900008 bytes"},
		{name: "payload 1,048,400 bytes", header: h("Content-Type", records.ContentMsgpack), body: long(1_048_400), outcome: "dead", reason: "decode", errText: "invalid application/msgpack payload"},
		// Headers the runtime sets on dead letters, forged on a record.
		{name: "forged dead-letter headers", header: h("EA-Dead-Reason", "none", "EA-Error", "forged", "EA-Seq", "1"), body: `{"by":"x"}`, outcome: "dead", reason: "decode", errText: "by"},
		// Subjects outside the contract: nothing stored that nobody processes.
		{name: "mailbox with an extra token", subject: names.Mailbox(target) + ".extra", header: h(), body: `{}`, outcome: "refused"},
		{name: "mailbox without an id", subject: "ea.mbox.counter", header: h(), body: `{}`, outcome: "refused"},
		// A wildcard token is published as a literal: stored, then read by
		// the partition and dead-lettered (bad_subject) under <kind>._.
		{name: "id *", subject: "ea.mbox.counter.*", header: h(), body: `{}`, outcome: "dead", deadOf: ref("counter", "_"), reason: "bad_subject", errText: `mailbox subject "ea.mbox.`},
		{name: "id >", subject: "ea.mbox.counter.>", header: h(), body: `{}`, outcome: "dead", deadOf: ref("counter", "_"), reason: "bad_subject", errText: `mailbox subject "ea.mbox.`},
		{name: "forged partition token", subject: "ea.mbox.3.counter.h1", header: h(), body: `{}`, outcome: "refused"},
		// Effectors that cannot take records.
		{name: "to an effector never created", subject: names.Mailbox(ref("counter", "never")), header: h(), body: `{}`, outcome: "dead", deadOf: ref("counter", "never"), reason: "no_effector", errText: "never created"},
	}

	// The dead letters of every effector a case names, followed from now.
	pulls := map[records.Ref]func() (actor.DeadLetter, error){}
	for _, tc := range cases {
		r := tc.deadOf
		if r.IsZero() {
			r = target
		}
		if _, ok := pulls[r]; ok {
			continue
		}
		dead, err := c.DeadLetters(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		next, stop := iterPull(dead)
		defer stop()
		pulls[r] = next
	}

	applied, deadCount := int64(count(t, c, target)), 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			subject := tc.subject
			if subject == "" {
				subject = names.Mailbox(target)
			}
			ack, err := conn.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subject, Header: tc.header, Data: []byte(tc.body)})
			switch {
			case tc.outcome == "refused":
				if err == nil {
					t.Fatalf("stored at sequence %d: a record nobody processes", ack.Sequence)
				}
				stillServes(t)
				return
			case err != nil:
				t.Fatalf("publish: %v", err)
			case tc.outcome == "duplicate":
				if !ack.Duplicate {
					t.Fatalf("a record id used twice was stored twice (seq %d)", ack.Sequence)
				}
			case ack.Duplicate:
				t.Fatalf("dropped as a duplicate")
			}
			switch tc.outcome {
			case "ok":
				applied++
				waitCount(t, conn, c, target, applied, 10*time.Second)
			case "dead":
				r := tc.deadOf
				if r.IsZero() {
					r, deadCount = target, deadCount+1
				}
				dl, err := pulls[r]()
				if err != nil {
					t.Fatal(err)
				}
				if dl.Reason != tc.reason || !strings.Contains(dl.Error, tc.errText) || dl.Seq != ack.Sequence {
					t.Fatalf("dead letter seq %d reason %q error %.300q, want seq %d reason %q saying %q", dl.Seq, dl.Reason, dl.Error, ack.Sequence, tc.reason, tc.errText)
				}
				if tc.deadOf.IsZero() {
					actortest.Eventually(t, 10*time.Second, "status ERROR at the record", func() bool {
						doc, err := c.State(ctx, target)
						return err == nil && doc.Seq == ack.Sequence && doc.Status == actor.StatusError
					})
				}
			}
			if got := count(t, c, target); got != applied {
				t.Fatalf("count %d, want %d", got, applied)
			}
			stillServes(t)
		})
	}

	// Nothing lost: every record stored in the target's mailbox was applied
	// or is a dead letter, once.
	stored := mailboxCount(t, conn, target)
	doc, err := c.State(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, tc := range cases {
		if tc.outcome == "ok" && tc.subject == "" {
			ok++
		}
	}
	if stored != uint64(ok+deadCount) {
		t.Errorf("mailbox holds %d records, want %d applied + %d dead", stored, ok, deadCount)
	}
	if doc.Seq == 0 || count(t, c, target) != applied || applied != int64(ok) {
		t.Errorf("applied %d, count %d, %d ok cases", applied, count(t, c, target), ok)
	}
	others := 0
	for _, tc := range cases {
		if tc.outcome == "dead" && !tc.deadOf.IsZero() {
			others++
		}
	}
	fmt.Fprintf(testWriter{t}, "%d records: %d applied, %d dead letters, %d refused or dropped\n", len(cases), ok, deadCount+others, len(cases)-ok-deadCount-others)
}

// mailboxCount is how many records r's mailbox holds.
func mailboxCount(t *testing.T, conn *bus.Conn, r records.Ref) uint64 {
	t.Helper()
	stream, err := conn.MailboxStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(context.Background(), jetstream.WithSubjectFilter(conn.Names().StoredMailbox(r)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[conn.Names().StoredMailbox(r)]
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
