package web_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/web"
)

type counterState struct {
	Count int64 `json:"count"`
}

// create creates counter/<id> and fails the test on error.
func (e *env) create(t *testing.T, id string) records.Ref {
	t.Helper()
	ref := records.Ref{Kind: "counter", ID: id}
	if _, err := e.actors.Create(context.Background(), ref, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// sendInc sends n records of type typ to ref through the Go client and
// returns them as stored.
func (e *env) sendInc(t *testing.T, ref records.Ref, typ, process string, n int) []records.Record {
	t.Helper()
	var out []records.Record
	for range n {
		rec, err := records.NewJSON(typ, map[string]int{"by": 1})
		if err != nil {
			t.Fatal(err)
		}
		rec.Process = process
		sent, err := e.actors.Send(context.Background(), ref, rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sent)
	}
	return out
}

func (e *env) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == k && lp.GetValue() == v {
			return true
		}
	}
	return false
}

func TestGateway(t *testing.T) {
	const dupWindow = time.Second
	e := newEnv(t, envOpts{supervisor: true, dupWindow: dupWindow, cfg: web.Config{MaxSubscriptions: 3, MaxFrame: 64 << 10}})
	ctx := context.Background()

	t.Run("SendAckDuplicateAndOutbox", func(t *testing.T) {
		c1 := e.create(t, "c1")
		c := e.dial(t, nil)
		if w := c.next("welcome", isType("welcome")); num(w["version"]) != web.ProtocolVersion {
			t.Fatalf("welcome: %v", w)
		}
		c.write(map[string]any{"type": "subscribe", "sub": "out", "topic": "outbox", "effector": "counter/c1"})
		c.next("subscribed", isType("subscribed"))
		c.write(map[string]any{"type": "send", "req": "r1", "to": "counter/c1",
			"record": map[string]any{"id": "rec-1", "type": "inc", "process": "p-send", "payload": map[string]any{"by": 2}}})
		ack := c.reply("r1")
		if ack["type"] != "ack" || ack["id"] != "rec-1" || num(ack["seq"]) == 0 || ack["duplicate"] == true || ack["stream"] != "EA_MBOX" {
			t.Fatalf("ack: %v", ack)
		}
		stream, err := e.conn.JetStream().Stream(ctx, e.conn.Names().MailboxStream())
		if err != nil {
			t.Fatal(err)
		}
		msg, err := stream.GetMsg(ctx, num(ack["seq"]))
		if err != nil || msg.Header.Get(records.HeaderID) != "rec-1" || msg.Header.Get(records.HeaderProcess) != "p-send" {
			t.Fatalf("stored message at the ack's seq: %v %v", msg, err)
		}
		out := c.next("outbox record", isType("record"))
		rec := out["record"].(map[string]any)
		if rec["type"] != "count" || rec["cause"] != "rec-1" || rec["json"].(map[string]any)["count"].(float64) != 2 {
			t.Fatalf("outbox record: %v", out)
		}
		// A re-send within the duplicate window: stored once.
		c.write(map[string]any{"type": "send", "req": "r2", "to": "counter/c1",
			"record": map[string]any{"id": "rec-1", "type": "inc", "payload": map[string]any{"by": 2}}})
		if ack2 := c.reply("r2"); ack2["type"] != "ack" || ack2["duplicate"] != true || num(ack2["seq"]) != num(ack["seq"]) {
			t.Fatalf("re-send ack: %v (first %v)", ack2, ack)
		}
		// The same id to another effector is refused, not stored.
		e.create(t, "c1b")
		c.write(map[string]any{"type": "send", "req": "r3", "to": "counter/c1b",
			"record": map[string]any{"id": "rec-1", "type": "inc"}})
		if f := c.reply("r3"); f["type"] != "error" || f["code"] != web.CodeConflict {
			t.Fatalf("same id elsewhere: %v", f)
		}
		doc, err := e.actors.StateAt(ctx, c1, num(ack["seq"]))
		if err != nil {
			t.Fatal(err)
		}
		var s counterState
		if err := doc.Decode(&s); err != nil || s.Count != 2 {
			t.Fatalf("state %+v %v", s, err)
		}
		if n := e.metric(t, "ea_gateway_sends_total", "outcome", "duplicate"); n != 1 {
			t.Fatalf("duplicate sends counted %v, want 1", n)
		}
	})

	t.Run("ResendPastDuplicateWindow", func(t *testing.T) {
		// The streams of this test forget ids after dupWindow: past it
		// JetStream stores a re-publish again, and the gateway must find
		// the id in the record store instead.
		ref := e.create(t, "late")
		sent := e.sendInc(t, ref, "inc", "", 1)[0]
		control, err := records.NewJSON("inc", map[string]int{"by": 1})
		if err != nil {
			t.Fatal(err)
		}
		first, err := e.conn.JetStream().PublishMsg(ctx, control.Msg(e.conn.Names().Mailbox(ref)))
		if err != nil {
			t.Fatal(err)
		}
		c := e.dial(t, nil)
		actortest.Eventually(t, 10*time.Second, "record indexed", func() bool {
			c.write(map[string]any{"type": "get", "req": "g", "id": sent.ID})
			return c.reply("g")["type"] == "result"
		})
		time.Sleep(dupWindow + 500*time.Millisecond) // the window passes
		// The premise: JetStream alone now stores the same id again.
		again, err := e.conn.JetStream().PublishMsg(ctx, control.Msg(e.conn.Names().Mailbox(ref)))
		if err != nil || again.Duplicate || again.Sequence == first.Sequence {
			t.Fatalf("re-publish past the window: %+v %v, want stored anew (first at %d)", again, err, first.Sequence)
		}
		stream, err := e.conn.JetStream().Stream(ctx, e.conn.Names().MailboxStream())
		if err != nil {
			t.Fatal(err)
		}
		before, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.write(map[string]any{"type": "send", "req": "r", "to": "counter/late",
			"record": map[string]any{"id": sent.ID, "type": "inc", "payload": map[string]any{"by": 1}}})
		ack := c.reply("r")
		if ack["type"] != "ack" || ack["duplicate"] != true || num(ack["seq"]) != sent.Seq {
			t.Fatalf("re-send: %v, want duplicate at %d", ack, sent.Seq)
		}
		after, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.State.LastSeq != before.State.LastSeq {
			t.Fatalf("the re-send reached the mailbox: last seq %d -> %d", before.State.LastSeq, after.State.LastSeq)
		}
	})

	t.Run("ResumeOutboxNoGapNoDuplicate", func(t *testing.T) {
		ref := e.create(t, "resume")
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "sub": "o", "topic": "outbox", "effector": "counter/resume", "from": 1})
		c.next("subscribed", isType("subscribed"))
		e.sendInc(t, ref, "inc", "", 3)
		var last uint64
		for i := range 3 {
			f := c.next("record", isType("record"))
			if s := num(f["seq"]); s <= last {
				t.Fatalf("record %d: seq %d not above %d", i, s, last)
			}
			last = num(f["seq"])
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		<-c.done
		e.sendInc(t, ref, "inc", "", 4) // while disconnected
		c2 := e.dial(t, nil)
		c2.write(map[string]any{"type": "subscribe", "sub": "o", "topic": "outbox", "effector": "counter/resume", "from": last + 1})
		c2.next("subscribed", isType("subscribed"))
		counts := []int64{}
		for range 4 {
			f := c2.next("record", isType("record"))
			if s := num(f["seq"]); s <= last {
				t.Fatalf("after resume: seq %d not above %d (duplicate)", s, last)
			}
			last = num(f["seq"])
			counts = append(counts, int64(f["record"].(map[string]any)["json"].(map[string]any)["count"].(float64)))
		}
		if fmt.Sprint(counts) != "[4 5 6 7]" {
			t.Fatalf("counts after resume %v, want [4 5 6 7] (no gap)", counts)
		}
		e.sendInc(t, ref, "inc", "", 1) // a sentinel: the next frame must be it
		f := c2.next("record", isType("record"))
		if n := f["record"].(map[string]any)["json"].(map[string]any)["count"].(float64); n != 8 {
			t.Fatalf("frame after the resumed ones has count %v, want 8 (the sentinel)", n)
		}
	})

	t.Run("ResumeDeadLetters", func(t *testing.T) {
		ref := e.create(t, "dead")
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "sub": "d", "topic": "dead", "effector": "counter/dead", "from": 1})
		c.next("subscribed", isType("subscribed"))
		bad := e.sendInc(t, ref, "nope", "", 2)
		var last uint64
		for i := range 2 {
			f := c.next("dead letter", isType("dead"))
			if f["reason"] != "rejected" || f["record"].(map[string]any)["id"] != bad[i].ID || num(f["mailbox_seq"]) != bad[i].Seq {
				t.Fatalf("dead letter %d: %v", i, f)
			}
			last = num(f["seq"])
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		<-c.done
		more := e.sendInc(t, ref, "nope", "", 2)
		c2 := e.dial(t, nil)
		c2.write(map[string]any{"type": "subscribe", "sub": "d", "topic": "dead", "effector": "counter/dead", "from": last + 1})
		for i := range 2 {
			f := c2.next("dead letter", isType("dead"))
			if f["record"].(map[string]any)["id"] != more[i].ID {
				t.Fatalf("resumed dead letter %d: %v, want %s", i, f["record"], more[i].ID)
			}
		}
		sentinel := e.sendInc(t, ref, "nope", "", 1)
		if f := c2.next("dead letter", isType("dead")); f["record"].(map[string]any)["id"] != sentinel[0].ID {
			t.Fatalf("frame after the resumed ones: %v, want the sentinel", f["record"])
		}
	})

	t.Run("ResumeState", func(t *testing.T) {
		ref := e.create(t, "st")
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "sub": "s", "topic": "state", "effector": "counter/st"})
		first := c.next("state", isType("state"))
		last := num(first["revision"])
		sent := e.sendInc(t, ref, "inc", "", 2)
		for {
			f := c.next("state", isType("state"))
			last = num(f["revision"])
			if num(f["document"].(map[string]any)["seq"]) == sent[1].Seq {
				break
			}
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		<-c.done
		sent = e.sendInc(t, ref, "inc", "", 3)
		if _, err := e.actors.StateAt(ctx, ref, sent[2].Seq); err != nil {
			t.Fatal(err)
		}
		c2 := e.dial(t, nil)
		c2.write(map[string]any{"type": "subscribe", "sub": "s", "topic": "state", "effector": "counter/st", "from": last + 1})
		f := c2.next("state", isType("state"))
		if num(f["revision"]) <= last {
			t.Fatalf("resumed state at revision %v, not above %d", f["revision"], last)
		}
		for num(f["document"].(map[string]any)["seq"]) != sent[2].Seq {
			prev := num(f["revision"])
			f = c2.next("state", isType("state"))
			if num(f["revision"]) <= prev {
				t.Fatalf("revision %v after %d", f["revision"], prev)
			}
		}
		if n := f["document"].(map[string]any)["state"].(map[string]any)["count"].(float64); n != 5 {
			t.Fatalf("count %v, want 5", n)
		}
	})

	t.Run("ResumeProcessRecords", func(t *testing.T) {
		ref := e.create(t, "proc")
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "sub": "p", "topic": "records", "process": "job-7"})
		seen := map[string]int{}
		var cursor string
		collect := func(c *client, want int) {
			for len(seen) < want {
				f := c.next("records", isType("records"))
				for _, r := range f["records"].([]any) {
					seen[r.(map[string]any)["id"].(string)]++
				}
				cursor = f["cursor"].(string)
			}
		}
		e.sendInc(t, ref, "inc", "job-7", 2) // 2 mailbox records and their 2 outputs
		collect(c, 4)
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		<-c.done
		e.sendInc(t, ref, "inc", "job-7", 2)
		c2 := e.dial(t, nil)
		c2.write(map[string]any{"type": "subscribe", "sub": "p", "topic": "records", "process": "job-7", "cursor": cursor})
		collect(c2, 8)
		e.sendInc(t, ref, "inc", "job-7", 1)
		collect(c2, 10)
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("record %s delivered %d times", id, n)
			}
		}
		if len(seen) != 10 {
			t.Fatalf("%d records, want 10", len(seen))
		}
	})

	t.Run("OrchestrationStartInputAndResume", func(t *testing.T) {
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "orch.start", "req": "s", "name": "demo", "input": map[string]any{"text": "hello world"}})
		res := c.reply("s")
		id, _ := res["result"].(map[string]any)["id"].(string)
		if res["type"] != "result" || id == "" {
			t.Fatalf("start: %v", res)
		}
		c.write(map[string]any{"type": "subscribe", "sub": "o", "topic": "orchestration", "id": id})
		var last uint64
		for {
			f := c.next("orchestration", isType("orchestration"))
			last = num(f["revision"])
			if f["orchestration"].(map[string]any)["status"] == "WAITING" {
				if f["orchestration"].(map[string]any)["waiting_for"] != "input" {
					t.Fatalf("waiting: %v", f)
				}
				break
			}
		}
		_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
		<-c.done
		c2 := e.dial(t, nil)
		c2.write(map[string]any{"type": "orch.input", "req": "i", "id": id, "input": map[string]any{"note": "from the test"}})
		if f := c2.reply("i"); f["type"] != "result" {
			t.Fatalf("input: %v", f)
		}
		c2.write(map[string]any{"type": "orch.input", "req": "i2", "id": id, "input": map[string]any{"note": "again"}})
		if f := c2.reply("i2"); f["type"] != "error" || (f["code"] != web.CodeNotWaiting && f["code"] != web.CodeFinished) {
			t.Fatalf("second input: %v", f)
		}
		c2.write(map[string]any{"type": "subscribe", "sub": "o", "topic": "orchestration", "id": id, "from": last + 1})
		var completed map[string]any
		for {
			f := c2.next("orchestration", isType("orchestration"))
			if num(f["revision"]) <= last {
				t.Fatalf("revision %v not above %d", f["revision"], last)
			}
			last = num(f["revision"])
			if o := f["orchestration"].(map[string]any); o["status"] == "COMPLETED" {
				completed = o
				break
			}
		}
		c2.write(map[string]any{"type": "orch.status", "req": "st", "id": id})
		if f := c2.reply("st"); f["result"].(map[string]any)["status"] != "COMPLETED" {
			t.Fatalf("status: %v", f)
		} else if !reflect.DeepEqual(f["result"], completed) {
			// One shape: a frame's orchestration is what orch.status answers.
			t.Fatalf("status %v\nlast orchestration frame %v", f["result"], completed)
		}
		c2.write(map[string]any{"type": "orch.cancel", "req": "x", "id": id})
		if f := c2.reply("x"); f["code"] != web.CodeFinished {
			t.Fatalf("cancel of a finished one: %v", f)
		}
		c2.write(map[string]any{"type": "orch.status", "req": "u", "id": "nope"})
		if f := c2.reply("u"); f["code"] != web.CodeNotFound {
			t.Fatalf("status of unknown: %v", f)
		}
	})

	t.Run("Requests", func(t *testing.T) {
		c := e.dial(t, nil)
		ask := func(f map[string]any) map[string]any {
			t.Helper()
			f["req"] = fmt.Sprint(f["type"], "-", time.Now().UnixNano())
			c.write(f)
			return c.reply(f["req"].(string))
		}
		res := func(f map[string]any) map[string]any {
			t.Helper()
			r := ask(f)
			if r["type"] != "result" {
				t.Fatalf("%v: %v", f["type"], r)
			}
			return r["result"].(map[string]any)
		}
		doc := res(map[string]any{"type": "create", "effector": "counter/rq", "state": map[string]any{"count": 10}})
		if doc["status"] != "IDLE" || doc["state"].(map[string]any)["count"].(float64) != 10 {
			t.Fatalf("create: %v", doc)
		}
		if r := ask(map[string]any{"type": "create", "effector": "counter/rq"}); r["code"] != web.CodeExists {
			t.Fatalf("create again: %v", r)
		}
		if r := ask(map[string]any{"type": "create", "effector": "nobody/x"}); r["code"] != web.CodeNoHost {
			t.Fatalf("create of a kind no node hosts: %v", r)
		}
		c.write(map[string]any{"type": "send", "req": "s", "to": "counter/rq", "record": map[string]any{"id": "rq-1", "type": "inc"}})
		ack := c.reply("s")
		if _, err := e.actors.StateAt(ctx, records.Ref{Kind: "counter", ID: "rq"}, num(ack["seq"])); err != nil {
			t.Fatal(err)
		}
		if st := res(map[string]any{"type": "state", "effector": "counter/rq"}); st["state"].(map[string]any)["count"].(float64) != 11 {
			t.Fatalf("state: %v", st)
		}
		if ks := res(map[string]any{"type": "kinds"}); !strings.Contains(fmt.Sprint(ks["kinds"]), "kind:counter") {
			t.Fatalf("kinds: %v", ks)
		}
		if effs := res(map[string]any{"type": "effectors", "kind": "counter", "limit": 1000}); !strings.Contains(fmt.Sprint(effs["effectors"]), "id:rq") {
			t.Fatalf("effectors: %v", effs)
		}
		actortest.Eventually(t, 10*time.Second, "the record and its output in a query", func() bool {
			page := res(map[string]any{"type": "query", "query": map[string]any{"effector": "counter/rq"}})
			return len(page["records"].([]any)) == 2
		})
		if r := res(map[string]any{"type": "get", "id": "rq-1"}); r["box"] != "mailbox" || r["effector"] != "counter/rq" {
			t.Fatalf("get: %v", r)
		}
		if r := ask(map[string]any{"type": "get", "id": "never-sent"}); r["code"] != web.CodeNotFound {
			t.Fatalf("get of an unknown id: %v", r)
		}
		if d := res(map[string]any{"type": "terminate", "effector": "counter/rq"}); d["status"] != "TERMINATED" {
			t.Fatalf("terminate: %v", d)
		}
		if r := ask(map[string]any{"type": "send", "to": "counter/rq", "record": map[string]any{"type": "inc"}}); r["code"] != web.CodeTerminated {
			t.Fatalf("send to a terminated effector: %v", r)
		}
		if r := ask(map[string]any{"type": "state", "effector": "counter/rq", "state": 1}); r["code"] != web.CodeBadRequest {
			t.Fatalf("state with a state: %v", r)
		}
	})

	t.Run("OutboxOfAKind", func(t *testing.T) {
		a, b := e.create(t, "kind-a"), e.create(t, "kind-b")
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "subscribe", "sub": "k", "topic": "outbox", "kind": "counter"})
		c.next("subscribed", isType("subscribed"))
		e.sendInc(t, a, "inc", "", 1)
		e.sendInc(t, b, "inc", "", 1)
		got := map[string]bool{}
		for range 2 {
			got[c.next("record", isType("record"))["record"].(map[string]any)["effector"].(string)] = true
		}
		if !got["counter/kind-a"] || !got["counter/kind-b"] {
			t.Fatalf("records of %v, want both counters", got)
		}
	})

	t.Run("BadInputGetsErrorAndLosesNothing", func(t *testing.T) {
		ref := e.create(t, "bad")
		c := e.dial(t, nil)
		c.next("welcome", isType("welcome"))
		cases := []struct {
			name  string
			frame any
			code  string
		}{
			{"malformed JSON", []byte(`{"type":"send",`), web.CodeBadFrame},
			{"not an object", []byte(`[1,2]`), web.CodeBadFrame},
			{"missing type", map[string]any{"req": "x"}, web.CodeBadFrame},
			{"unknown type", map[string]any{"type": "explode", "req": "x"}, web.CodeUnknownType},
			{"unknown field", map[string]any{"type": "send", "req": "x", "to": "counter/bad", "recrod": map[string]any{}}, web.CodeBadRequest},
			{"bad kind", map[string]any{"type": "send", "req": "x", "to": "coun ter/bad", "record": map[string]any{"type": "inc"}}, web.CodeBadRequest},
			{"subject in id", map[string]any{"type": "send", "req": "x", "to": "counter/bad.>", "record": map[string]any{"type": "inc"}}, web.CodeBadRequest},
			{"no slash", map[string]any{"type": "send", "req": "x", "to": "counter", "record": map[string]any{"type": "inc"}}, web.CodeBadRequest},
			{"bad record type", map[string]any{"type": "send", "req": "x", "to": "counter/bad", "record": map[string]any{"type": "in c"}}, web.CodeBadRequest},
			{"bad priority", map[string]any{"type": "send", "req": "x", "to": "counter/bad", "record": map[string]any{"type": "inc", "priority": "urgent"}}, web.CodeBadRequest},
			{"unknown effector", map[string]any{"type": "send", "req": "x", "to": "counter/never", "record": map[string]any{"type": "inc"}}, web.CodeNotFound},
			{"bad topic", map[string]any{"type": "subscribe", "req": "x", "sub": "z", "topic": "everything"}, web.CodeBadRequest},
			{"bad subscribe effector", map[string]any{"type": "subscribe", "req": "x", "sub": "z", "topic": "outbox", "effector": "$JS/x"}, web.CodeBadRequest},
			{"wrong field for topic", map[string]any{"type": "subscribe", "req": "x", "sub": "z", "topic": "dead", "process": "p"}, web.CodeBadRequest},
			{"unknown subscription", map[string]any{"type": "unsubscribe", "req": "x", "sub": "none"}, web.CodeUnknownSub},
			{"bad cursor", map[string]any{"type": "subscribe", "req": "x", "sub": "bc", "topic": "records", "process": "p", "cursor": "garbage"}, web.CodeBadRequest},
			{"bad query", map[string]any{"type": "query", "req": "x", "query": map[string]any{"limit": 100000}}, web.CodeBadRequest},
			{"null type", []byte(`{"type":null}`), web.CodeBadFrame},
			{"type of the wrong kind", []byte(`{"type":7}`), web.CodeBadFrame},
			{"negative from", []byte(`{"type":"subscribe","req":"x","sub":"n","topic":"outbox","effector":"counter/bad","from":-1}`), web.CodeBadRequest},
			{"record not an object", []byte(`{"type":"send","req":"x","to":"counter/bad","record":[1]}`), web.CodeBadRequest},
			{"deep nesting", []byte(`{"type":"send","req":"x","to":"counter/bad","record":{"payload":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`), web.CodeBadFrame},
			{"orch input without id", map[string]any{"type": "orch.input", "req": "x", "input": 1}, web.CodeBadRequest},
			{"orch start unknown name", map[string]any{"type": "orch.start", "req": "x", "name": "no-such"}, web.CodeNotFound},
		}
		for _, tc := range cases {
			c.write(tc.frame)
			var f map[string]any
			f = c.next(tc.name, isType("error"))
			if f["code"] != tc.code || f["error"] == "" {
				t.Errorf("%s: got %v, want code %s", tc.name, f, tc.code)
			}
		}
		if err := c.ws.Write(ctx, websocket.MessageBinary, []byte("xx")); err != nil {
			t.Fatal(err)
		}
		if f := c.next("binary", isType("error")); f["code"] != web.CodeBadFrame {
			t.Fatalf("binary frame: %v", f)
		}
		// The connection still works, and a good send after all that is
		// stored and applied.
		c.write(map[string]any{"type": "send", "req": "ok", "to": "counter/bad", "record": map[string]any{"type": "inc"}})
		ack := c.reply("ok")
		if ack["type"] != "ack" {
			t.Fatalf("good send after bad ones: %v", ack)
		}
		doc, err := e.actors.StateAt(ctx, ref, num(ack["seq"]))
		if err != nil {
			t.Fatal(err)
		}
		var s counterState
		if err := doc.Decode(&s); err != nil || s.Count != 1 {
			t.Fatalf("state %+v %v", s, err)
		}
	})

	t.Run("SubscriptionLimit", func(t *testing.T) {
		c := e.dial(t, nil)
		for i := range 3 {
			c.write(map[string]any{"type": "subscribe", "sub": fmt.Sprint(i), "topic": "dead"})
			c.next("subscribed", isType("subscribed"))
		}
		c.write(map[string]any{"type": "subscribe", "sub": "3", "topic": "dead"})
		if f := c.next("error", isType("error")); f["code"] != web.CodeTooManySubs {
			t.Fatalf("4th subscription: %v", f)
		}
		// At the cap, a bad frame is a bad request and a taken name a
		// duplicate: the first error that applies wins, the cap last.
		c.write(map[string]any{"type": "subscribe", "sub": "0", "topic": "dead"})
		if f := c.next("error", isType("error")); f["code"] != web.CodeDuplicateSub {
			t.Fatalf("duplicate at the cap: %v", f)
		}
		c.write(map[string]any{"type": "subscribe", "sub": "9", "topic": "nothing"})
		if f := c.next("error", isType("error")); f["code"] != web.CodeBadRequest {
			t.Fatalf("bad topic at the cap: %v", f)
		}
		c.write(map[string]any{"type": "unsubscribe", "req": "u", "sub": "1"})
		if f := c.reply("u"); f["type"] != "unsubscribed" {
			t.Fatalf("unsubscribe: %v", f)
		}
		c.write(map[string]any{"type": "subscribe", "sub": "3", "topic": "dead"})
		c.next("subscribed", isType("subscribed"))
	})

	t.Run("OversizeFrameClosesWith1009", func(t *testing.T) {
		e := e.withGateway(t, web.Config{MaxFrame: 64 << 10}) // its own metrics
		c := e.dial(t, nil)
		c.next("welcome", isType("welcome"))
		big := `{"type":"ping","pad":"` + strings.Repeat("x", 70<<10) + `"}`
		_ = c.ws.Write(ctx, websocket.MessageText, []byte(big))
		if ce := c.closed(); ce.Code != websocket.StatusMessageTooBig || !strings.Contains(ce.Reason, "limit") {
			t.Fatalf("close %v", ce)
		}
		actortest.Eventually(t, 10*time.Second, "the close counted", func() bool {
			return e.metric(t, "ea_gateway_disconnects_total") == 1
		})
		if n := e.metric(t, "ea_gateway_disconnects_total", "reason", "frame_too_large"); n != 1 {
			t.Fatalf("disconnects with reason frame_too_large: %v, want 1 (error: %v)", n, e.metric(t, "ea_gateway_disconnects_total", "reason", "error"))
		}
	})

	t.Run("Auth", func(t *testing.T) { testAuth(t, e) })
	t.Run("RunAndStop", func(t *testing.T) { testRunAndStop(t, e) })
	t.Run("SlowReaderDisconnected", func(t *testing.T) { testSlowReader(t, e) })

	t.Run("ForeignOriginRefused", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, resp, err := websocket.Dial(dctx, e.url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("foreign origin: %v %v", resp, err)
		}
		// The gateway's own origin is fine.
		c := e.dial(t, http.Header{"Origin": {e.http.URL}})
		c.next("welcome", isType("welcome"))
	})
}

func testAuth(t *testing.T, e *env) {
	e = e.withGateway(t, web.Config{Token: "s3cret", AuthTimeout: 300 * time.Millisecond})

	t.Run("HeaderToken", func(t *testing.T) {
		c := e.dial(t, http.Header{"Authorization": {"Bearer s3cret"}})
		c.next("welcome", isType("welcome"))
	})
	t.Run("AuthFrame", func(t *testing.T) {
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "auth", "token": "s3cret"})
		c.next("welcome", isType("welcome"))
		c.write(map[string]any{"type": "ping", "req": "p"})
		c.reply("p")
	})
	for _, tc := range []struct {
		name  string
		hdr   http.Header
		frame any
		want  string
	}{
		{"WrongHeader", http.Header{"Authorization": {"Bearer nope"}}, nil, "wrong token"},
		{"WrongFrame", nil, map[string]any{"type": "auth", "token": "nope"}, "wrong token"},
		{"OtherFirstFrame", nil, map[string]any{"type": "send", "to": "counter/x"}, "first frame must be"},
		{"NoToken", nil, nil, "no auth frame within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial(t, tc.hdr)
			if tc.frame != nil {
				c.write(tc.frame)
			}
			ce := c.closed()
			if ce.Code != web.CloseUnauthorized || !strings.Contains(ce.Reason, tc.want) {
				t.Fatalf("close %v, want %d %q", ce, web.CloseUnauthorized, tc.want)
			}
			select {
			case f := <-c.frames:
				t.Fatalf("unauthorized client got a frame: %v", f)
			default:
			}
		})
	}
}

func testSlowReader(t *testing.T, e *env) {
	const buffer = 64 << 10
	e = e.withGateway(t, web.Config{SendBuffer: buffer, SlowReader: time.Second})
	ctx := context.Background()
	// 8 MiB in a mailbox no node reads: more than the socket buffers hold
	// (the client's receive buffer is made small).
	ghost := records.Ref{Kind: "ghost", ID: "slow"}
	pad := strings.Repeat("x", 64<<10)
	// A publisher of its own: PublishAsyncComplete waits for every async
	// publish of its JetStream context, and the env's is the node's too,
	// which may always have some in flight on a loaded machine.
	_, js := e.srv.Client(t)
	for range 128 {
		rec, err := records.NewJSON("pad", map[string]string{"pad": pad})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsgAsync(rec.Msg(e.conn.Names().Mailbox(ghost))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("publishing did not complete")
	}
	c := e.dialSmallBuffer(t)
	c.write(map[string]any{"type": "subscribe", "sub": "m", "topic": "mailbox", "effector": "ghost/slow", "from": 1})
	// The client does not read: the gateway disconnects it.
	actortest.Eventually(t, 20*time.Second, "slow reader disconnected", func() bool {
		return e.metric(t, "ea_gateway_disconnects_total", "reason", "slow_reader") == 1
	})
	// A client that reads again soon enough gets what was in flight, then
	// the close frame with the reason.
	c.startReading()
	if ce := c.closed(); ce.Code != web.CloseSlowReader || !strings.Contains(ce.Reason, "slow reader") {
		t.Fatalf("close %v, want %d slow reader", ce, web.CloseSlowReader)
	}
	actortest.Eventually(t, 10*time.Second, "connection gone", func() bool {
		return e.metric(t, "ea_gateway_connections") == 0
	})
	// Memory stayed bounded: the send buffer never held more than its
	// limit plus one frame.
	if peak := e.metric(t, "ea_gateway_send_buffer_peak_bytes"); peak > buffer+(64<<10)*2 {
		t.Fatalf("send buffer peaked at %v bytes, limit %d", peak, buffer)
	}
	// Nothing was lost: the records are all in the mailbox for a resume.
	stream, err := e.conn.JetStream().Stream(ctx, e.conn.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(e.conn.Names().StoredMailbox(ghost)))
	if err != nil || info.State.Subjects[e.conn.Names().StoredMailbox(ghost)] != 128 {
		t.Fatalf("mailbox: %v %v", info.State.Subjects, err)
	}
}
