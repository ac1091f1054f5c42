package actor_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// forbiddenReplies are EA-Reply subjects a record may never make a node
// publish to: each one was (or could be) an attack.
var forbiddenReplies = []string{
	"$KV.ea_state.counter.victim",      // overwrote another effector's state
	"$JS.API.STREAM.PURGE.KV_ea_state", // purged every state document
	"$JS.API.STREAM.PURGE.EA_RECORDS",  // purged the record log
	"$JS.API.STREAM.DELETE.EA_DEAD",    // …or deletes the dead letters
	"ea.out.counter.other",             // forges another effector's output
	"ea.dead.counter.x",                // forges a dead letter
	"ea.ctl.terminate.counter",         // calls a control endpoint
	"ea.orch.cancel",                   // calls an orchestration endpoint
	"$SYS.REQ.SERVER.PING",             // the system account's API
	"$O.files.C.x",                     // an object store
	"ea.mbox.counter.victim.extra",     // not a mailbox
	"replies.somewhere",                // not allowed by the operator
}

// TestReplyForbidden sends records whose EA-Reply names subjects records may
// not go to: each ends as a dead letter with reason reply_forbidden before the
// logic runs, nothing is published there, the victim's state, the state bucket
// and the record stream are intact, and replies to NATS inboxes still work.
func TestReplyForbidden(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	node := startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	c1, victim := ref("counter", "c1"), ref("counter", "victim")
	if _, err := c.Create(ctx, c1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, victim, kinds.CounterState{Count: 3}); err != nil {
		t.Fatal(err)
	}

	// Watch the forbidden subjects themselves (core subscriptions see what
	// anyone publishes there; the server answers $JS and $KV itself).
	seen := make(chan *nats.Msg, 64)
	for _, s := range forbiddenReplies {
		sub, err := conn.NATS().ChanSubscribe(s, seen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}

	dead, err := c.DeadLetters(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()
	json := map[string]string{"EA-Type": "inc", "Content-Type": records.ContentJSON}
	for i, subject := range forbiddenReplies {
		h := map[string]string{"EA-Reply": subject}
		for k, v := range json {
			h[k] = v
		}
		rawPublish(t, conn, c1, h, []byte(`{}`))
		dl, err := next()
		if err != nil {
			t.Fatal(err)
		}
		if dl.Reason != "reply_forbidden" || !strings.Contains(dl.Error, subject) || dl.Record.Reply != subject {
			t.Fatalf("EA-Reply %s: dead letter reason %q error %q reply %q, want reply_forbidden naming the subject", subject, dl.Reason, dl.Error, dl.Record.Reply)
		}
		if i == 0 {
			t.Logf("EA-Error: %s", dl.Error)
		}
		actortest.Eventually(t, 10*time.Second, "status ERROR", func() bool {
			doc, err := c.State(ctx, c1)
			return err == nil && doc.Seq == dl.Seq && doc.Status == actor.StatusError && doc.Error == dl.Error
		})
	}
	if got := count(t, c, c1); got != 0 {
		t.Fatalf("count of c1 = %d: the logic ran on a record with a forbidden EA-Reply", got)
	}

	// A reply to a NATS inbox (the default allow-list) works, and clears the
	// error.
	inbox := conn.NATS().NewRespInbox()
	sub, err := conn.NATS().SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	rawPublish(t, conn, c1, map[string]string{"EA-Type": "inc", "Content-Type": records.ContentJSON, "EA-Reply": inbox}, []byte(`{}`))
	msg, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("reply to %s: %v", inbox, err)
	}
	if got := msg.Header.Get(records.HeaderType); got != "count" {
		t.Fatalf("reply of type %q, want count", got)
	}
	waitCount(t, conn, c, c1, 1, 10*time.Second)
	actortest.Eventually(t, 10*time.Second, "status IDLE", func() bool {
		doc, err := c.State(ctx, c1)
		return err == nil && doc.Status == actor.StatusIdle && doc.Error == ""
	})

	// Nothing was published on a forbidden subject.
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-seen:
		t.Fatalf("a message was published on forbidden subject %s", m.Subject)
	default:
	}
	// The victim is intact: state, id and kind; it still terminates.
	doc, err := c.State(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if doc.ID != "victim" || doc.Kind != "counter" || count(t, c, victim) != 3 {
		t.Fatalf("victim's state document changed: %+v", doc)
	}
	if _, err := c.Terminate(ctx, victim); err != nil {
		t.Fatalf("terminate the victim: %v", err)
	}
	// The state bucket and the record stream were not purged.
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := bucket.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for k := range keys.Keys() {
		all = append(all, k)
	}
	if !slices.Contains(all, "counter.c1") || !slices.Contains(all, "counter.victim") {
		t.Fatalf("state bucket keys %v, want counter.c1 and counter.victim", all)
	}
	for _, name := range []string{conn.Names().MailboxStream(), conn.Names().OutboxStream(), conn.Names().DeadStream()} {
		s, err := conn.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.FirstSeq != 1 || info.State.Msgs == 0 {
			t.Fatalf("stream %s: first seq %d, %d messages: purged", name, info.State.FirstSeq, info.State.Msgs)
		}
	}
	if got := metricSum(t, node.Registry, "ea_dead_letters_total", "kind", "counter", "reason", "reply_forbidden"); got != float64(len(forbiddenReplies)) {
		t.Errorf("ea_dead_letters_total{reason=reply_forbidden} = %v, want %d", got, len(forbiddenReplies))
	}
}

// TestReplySubjects: the operator's allow-list lets replies go to subjects it
// names, and only those; patterns that could only match forbidden subjects
// are refused when the node is made.
func TestReplySubjects(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNodeWith(t, conn, actor.Options{ReplySubjects: []string{"replies.>"}}, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	c1 := ref("counter", "c1")
	if _, err := c.Create(ctx, c1, nil); err != nil {
		t.Fatal(err)
	}
	sub, err := conn.NATS().SubscribeSync("replies.>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	inc := map[string]string{"EA-Type": "inc", "Content-Type": records.ContentJSON}
	with := func(reply string) map[string]string {
		h := map[string]string{"EA-Reply": reply}
		for k, v := range inc {
			h[k] = v
		}
		return h
	}
	rawPublish(t, conn, c1, with("replies.a.b"), []byte(`{}`))
	msg, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("reply to replies.a.b: %v", err)
	}
	if msg.Subject != "replies.a.b" {
		t.Fatalf("reply on %s", msg.Subject)
	}
	// _INBOX is not in this allow-list.
	dead, err := c.DeadLetters(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()
	rawPublish(t, conn, c1, with("_INBOX.x"), []byte(`{}`))
	dl, err := next()
	if err != nil {
		t.Fatal(err)
	}
	if dl.Reason != "reply_forbidden" || !strings.Contains(dl.Error, "--reply-subjects") {
		t.Fatalf("dead letter %q %q, want reply_forbidden saying how to allow it", dl.Reason, dl.Error)
	}
	waitCount(t, conn, c, c1, 1, 10*time.Second)

	for _, bad := range [][]string{{"$KV.>"}, {"replies.>", "$JS.API.>"}, {"ea.ctl.>"}, {"ea.>"}, {"a.>.b"}} {
		_, err := actor.NewNode(conn, actor.Options{ReplySubjects: bad})
		if !errors.Is(err, actor.ErrInvalid) || !strings.Contains(err.Error(), bad[len(bad)-1]) {
			t.Errorf("NewNode with ReplySubjects %q: %v, want ErrInvalid naming the pattern", bad, err)
		}
	}
}

// TestOutputsChecked: logic cannot publish where records may not go, even
// when it ignores the error: the attempt fails with ErrForbidden.
func TestOutputsChecked(t *testing.T) {
	t.Parallel()
	ignoring := actor.Kind[kinds.CounterState]{
		Name: "ignorer",
		Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
			_ = ctx.Reply("count", s) // the error is ignored
			s.Count++
			return s, ctx.Emit("count", s)
		},
	}
	self := ref("ignorer", "i1")
	for _, reply := range []string{"$KV.ea_state.counter.victim", "ea.out.counter.other", "ea.ctl.terminate.counter"} {
		rec := records.Record{Type: "inc", Reply: reply}
		_, outs, err := kinds.Counter().Apply(context.Background(), ref("counter", "c1"), rec, kinds.CounterState{})
		if !errors.Is(err, actor.ErrForbidden) || !actor.IsPermanent(err) || len(outs) != 0 {
			t.Errorf("counter replying to %s: outs %v, err %v; want a permanent ErrForbidden and no output", reply, outs, err)
		}
		_, outs, err = ignoring.Apply(context.Background(), self, rec, kinds.CounterState{})
		if !errors.Is(err, actor.ErrForbidden) || len(outs) != 0 {
			t.Errorf("logic ignoring the refusal of %s: outs %v, err %v; want ErrForbidden and no output", reply, outs, err)
		}
	}
	_, outs, err := ignoring.Apply(context.Background(), self, records.Record{Type: "inc", Reply: "_INBOX.x"}, kinds.CounterState{})
	if err != nil || len(outs) != 2 || outs[0].Subject != "_INBOX.x" || outs[1].Subject != "ea.out.ignorer.i1" {
		t.Errorf("reply to an inbox: outs %v, err %v", outs, err)
	}
}

// TestStateMismatch: a state document whose kind and id are not those of its
// key (written by hand into the bucket) is an error when read, never taken
// for the effector's state.
func TestStateMismatch(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	mallory, victim := ref("counter", "mallory"), ref("counter", "victim")
	doc, err := c.Create(ctx, mallory, kinds.CounterState{Count: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Copy mallory's document under victim's key, as a client with write
	// access to the bucket could.
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(ctx, conn.Names().StateKey(mallory))
	if err != nil {
		t.Fatal(err)
	}
	rev, err := bucket.Put(ctx, conn.Names().StateKey(victim), ent.Value())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.State(ctx, victim)
	if !errors.Is(err, actor.ErrStateMismatch) || !strings.Contains(err.Error(), `id "mallory"`) {
		t.Fatalf("reading victim's state: %v, want ErrStateMismatch naming the id found", err)
	}
	// Terminate refuses to act on it (and writes nothing).
	if _, err := c.Terminate(ctx, victim); err == nil {
		t.Fatal("terminate acted on a document of another effector")
	}
	after, err := bucket.Get(ctx, conn.Names().StateKey(victim))
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision() != rev || !bytes.Equal(after.Value(), ent.Value()) {
		t.Fatalf("victim's key was written: revision %d", after.Revision())
	}
	// Mallory is unaffected.
	if got, err := c.State(ctx, mallory); err != nil || got.ID != doc.ID || count(t, c, mallory) != 7 {
		t.Fatalf("mallory: %+v %v", got, err)
	}
}

// bigRecord publishes a record with the given headers and payload to r's
// mailbox through JetStream and returns its stream sequence after checking
// the server stored it whole.
func bigRecord(t *testing.T, conn *bus.Conn, r records.Ref, h nats.Header, data []byte) uint64 {
	t.Helper()
	ctx := ctxT(t)
	ack, err := conn.JetStream().PublishMsg(ctx, &nats.Msg{Subject: conn.Names().Mailbox(r), Header: h, Data: data})
	if err != nil {
		t.Fatalf("publish %d-byte record (headers %d): %v", len(data), bus.HeaderSize(h), err)
	}
	if ack.Duplicate {
		t.Fatalf("record %s dropped as a duplicate", h.Get(records.HeaderID))
	}
	stream, err := conn.MailboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Data) != len(data) {
		t.Fatalf("stored %d bytes of %d", len(raw.Data), len(data))
	}
	return ack.Sequence
}

// TestDeadLetterAtEverySize: records just under the server's limits (a
// payload of almost max_payload, an EA-Type of almost 64 KiB) are stored, but
// a copy with the dead-letter headers would not be: the dead letter carries
// what fits, says so, and names the original; the mailbox moves on, the node
// stops at once, and nothing blocks after a restart.
// Not parallel: it bounds how long a node takes to stop.
func TestDeadLetterAtEverySize(t *testing.T) {
	_, conn := server(t)
	max := conn.MaxPayload()
	node := startNodeWith(t, conn, actor.Options{ShutdownGrace: 30 * time.Second}, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	c1 := ref("counter", "c1")
	if _, err := c.Create(ctx, c1, nil); err != nil {
		t.Fatal(err)
	}
	dead, err := c.DeadLetters(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()

	bigPayload := nats.Header{records.HeaderID: {"big-payload"}, records.HeaderType: {"inc"}}
	// A msgpack bin32 of almost max_payload: 100 bytes to spare, not enough
	// for the dead-letter headers.
	payload := make([]byte, int(max)-bus.HeaderSize(bigPayload)-100)
	payload[0] = 0xc6
	binary.BigEndian.PutUint32(payload[1:5], uint32(len(payload)-5))
	bigType := nats.Header{records.HeaderID: {"big-type"}, records.HeaderType: {strings.Repeat("t", 65300)}}
	if bus.HeaderSize(bigType) > bus.MaxHeaderBytes {
		t.Fatalf("test setup: header %d bytes", bus.HeaderSize(bigType))
	}
	cases := []struct {
		name      string
		h         nats.Header
		data      []byte
		reason    string
		truncated string
	}{
		{"payload of almost max_payload", bigPayload, payload, "oversize", records.TruncatedPayload},
		{"EA-Type of almost 64 KiB", bigType, []byte{0x80}, "decode", records.TruncatedHeaders},
	}
	stream, err := conn.MailboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		seq := bigRecord(t, conn, c1, tc.h, tc.data)
		dl, err := next()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if dl.Reason != tc.reason || dl.Seq != seq || dl.Stream != conn.Names().MailboxStream() || !slices.Contains(dl.Truncated, tc.truncated) {
			t.Fatalf("%s: dead letter reason %q seq %d stream %q truncated %v; want %s, %d, %s, %s", tc.name, dl.Reason, dl.Seq, dl.Stream, dl.Truncated, tc.reason, seq, conn.Names().MailboxStream(), tc.truncated)
		}
		if want := "dead:" + tc.h.Get(records.HeaderID); dl.Record.ID != want {
			t.Fatalf("%s: dead letter id %q, want %q", tc.name, dl.Record.ID, want)
		}
		// The original can be fetched whole by the reference.
		orig, err := stream.GetMsg(ctx, dl.Seq)
		if err != nil || !bytes.Equal(orig.Data, tc.data) || orig.Header.Get(records.HeaderType) != tc.h.Get(records.HeaderType) {
			t.Fatalf("%s: original at %s/%d: %v", tc.name, dl.Stream, dl.Seq, err)
		}
		actortest.Eventually(t, 10*time.Second, tc.name+": status ERROR", func() bool {
			doc, err := c.State(ctx, c1)
			return err == nil && doc.Seq == seq && doc.Status == actor.StatusError
		})
	}
	publishIncs(t, conn, c1, 1)
	waitCount(t, conn, c, c1, 1, 10*time.Second)
	actortest.Eventually(t, 10*time.Second, "status IDLE", func() bool {
		doc, err := c.State(ctx, c1)
		return err == nil && doc.Status == actor.StatusIdle
	})

	// A big record to an effector never created goes to its dead letters too.
	ghost := ref("counter", "ghost")
	ghostDead, err := c.DeadLetters(ctx, ghost)
	if err != nil {
		t.Fatal(err)
	}
	nextGhost, stopGhost := iterPull(ghostDead)
	defer stopGhost()
	bigPayload.Set(records.HeaderID, "big-payload-2")
	seq := bigRecord(t, conn, ghost, bigPayload, payload)
	dl, err := nextGhost()
	if err != nil {
		t.Fatal(err)
	}
	if dl.Reason != "no_effector" || dl.Seq != seq || !slices.Contains(dl.Truncated, records.TruncatedPayload) {
		t.Fatalf("ghost: dead letter %q seq %d truncated %v", dl.Reason, dl.Seq, dl.Truncated)
	}

	start := time.Now()
	node.Stop(t)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the node took %s to stop (grace 30s): something was stuck", took)
	}

	// After a restart nothing blocks: the big records were acknowledged.
	startNode(t, conn, nil, kinds.Counter())
	publishIncs(t, conn, c1, 1)
	waitCount(t, conn, c, c1, 2, 20*time.Second)
	info, err := conn.JetStream().Stream(ctx, conn.Names().DeadStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Errorf("%d dead letters, want 3", n)
	}
}

type blowState struct {
	N    int    `json:"n"`
	Blob []byte `json:"blob,omitempty"`
}

// TestOutputTooLarge: logic whose output or new state the server can never
// take sends its input to dead letters (output_too_large, state_too_large),
// whether it returns the error or ignores it, and the mailbox moves on; so
// does an output the server refuses although the connection's limit would
// allow it (a stream's MaxMsgSize), emitted at the end or streamed.
func TestOutputTooLarge(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	ctx := ctxT(t)
	blower := actor.Kind[blowState]{
		Name: "blower",
		Logic: func(ctx *actor.Context, s blowState) (blowState, error) {
			switch ctx.Record().Type {
			case "huge":
				return s, ctx.Emit("huge", bytes.Repeat([]byte{1}, 2<<20))
			case "huge-ignored":
				_ = ctx.Emit("huge", bytes.Repeat([]byte{1}, 2<<20))
			case "fat":
				s.Blob = bytes.Repeat([]byte{1}, 1100<<10)
			case "big":
				return s, ctx.Emit("big", bytes.Repeat([]byte{1}, 64<<10))
			case "big-now":
				return s, ctx.EmitNow("big", bytes.Repeat([]byte{1}, 64<<10))
			}
			s.N++
			return s, ctx.Emit("count", s.N)
		},
	}
	startNode(t, conn, nil, blower)
	c := newClient(t, conn)
	b1 := ref("blower", "b1")
	if _, err := c.Create(ctx, b1, nil); err != nil {
		t.Fatal(err)
	}
	dead, err := c.DeadLetters(ctx, b1)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()
	send := func(typ string) {
		t.Helper()
		rec, err := records.New(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, b1, rec); err != nil {
			t.Fatal(err)
		}
	}
	blowerCount := func() int64 {
		doc, err := c.State(ctx, b1)
		if err != nil {
			t.Fatal(err)
		}
		var s blowState
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if len(s.Blob) > 0 {
			t.Fatalf("a state of %d bytes was written", len(s.Blob))
		}
		return int64(s.N)
	}
	expectDead := func(what, reason string) {
		t.Helper()
		dl, err := next()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if dl.Reason != reason {
			t.Fatalf("%s: dead letter reason %q (%s), want %s", what, dl.Reason, dl.Error, reason)
		}
		t.Logf("%s: %s", what, dl.Error)
	}
	send("huge")
	expectDead("output above max_payload, error returned", "output_too_large")
	send("huge-ignored")
	expectDead("output above max_payload, error ignored", "output_too_large")
	send("fat")
	expectDead("state above max_payload", "state_too_large")
	send("inc")
	actortest.Eventually(t, 10*time.Second, "next record applied", func() bool { return blowerCount() == 1 })

	// The stream takes less than the connection: the server refuses the
	// output when it is published; that is not retried as an outage.
	s, err := conn.OutboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = 32 << 10
	if _, err := conn.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	send("big")
	expectDead("output above the stream's MaxMsgSize", "output_too_large")
	send("big-now")
	expectDead("streamed output above the stream's MaxMsgSize", "output_too_large")
	send("inc")
	actortest.Eventually(t, 10*time.Second, "next record applied", func() bool { return blowerCount() == 2 })
	if ids := outputs(t, conn, conn.Names().Outbox(b1)); len(ids) != 2 {
		t.Fatalf("outbox holds %v, want only the two counts", ids)
	}
}
