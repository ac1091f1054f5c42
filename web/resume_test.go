package web_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// TestGatewayResumePositions: the kind-wide outbox and state topics resume
// from a position per stream (per state bucket), with 3 stream groups
// (counters spread over several groups) and with one stream (one entry,
// the same code path): subscribe, read some frames, disconnect, more
// records are processed, subscribe again with the positions built from the
// frames' "stream"/"bucket" and "seq"/"revision" — exactly the records and
// changes after the positions come, each once, each stream's in order, and
// then the live ones. The subscribed frame of a kind-wide outbox names
// every stream's start; bad positions are refused with bad_request.
func TestGatewayResumePositions(t *testing.T) {
	for _, groups := range []int{3, 1} {
		t.Run(fmt.Sprint("groups=", groups), func(t *testing.T) {
			testGatewayResume(t, groups)
		})
	}
}

// at is a frame's position: its stream (or bucket) and sequence (or
// revision).
type at struct {
	stream string
	seq    uint64
}

func testGatewayResume(t *testing.T, groups int) {
	const (
		counters = 6
		first    = 4 // incs per counter before the disconnect
		more     = 2 // incs per counter while disconnected
	)
	e := newEnv(t, envOpts{groups: groups})
	n := e.conn.Names()
	ctx := context.Background()
	used := map[int]bool{}
	var refs []records.Ref
	for i := 0; len(refs) < counters || groups > 1 && len(used) < 2; i++ {
		if i == 24 {
			t.Fatalf("24 counters all in group(s) %v", used)
		}
		ref := e.create(t, fmt.Sprint("r", i))
		refs = append(refs, ref)
		used[n.GroupOf(ref)] = true
	}
	sendAll := func(per int) {
		t.Helper()
		for _, ref := range refs {
			sent := e.sendInc(t, ref, "inc", "", per)
			if _, err := e.actors.StateAt(ctx, ref, sent[len(sent)-1].Seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	sendAll(first)
	total := len(refs) * first

	// Outbox: from every stream's start ({}), half of the outputs.
	c := e.dial(t, nil)
	c.next("welcome", isType("welcome"))
	c.write(map[string]any{"type": "subscribe", "sub": "o", "topic": "outbox", "kind": "counter", "positions": map[string]any{}})
	sub := c.next("subscribed", isType("subscribed"))
	if got := positionsOf(sub); !maps.Equal(got, startAll(n.OutboxStreams())) {
		t.Fatalf("subscribed from {}: positions %v, want every outbox stream %v at 1", got, n.OutboxStreams())
	}
	pos := actor.Positions{}
	seen := map[string]bool{}
	// At least half, and until records of two streams came (a stream's
	// records may all come before another's).
	half := 0
	for half < total && (half < total/2 || len(pos) < min(2, groups)) {
		half++
		f := c.next("record", isType("record"))
		rec := f["record"].(map[string]any)
		if f["stream"] != rec["stream"] || !slices.Contains(n.OutboxStreams(), fmt.Sprint(f["stream"])) {
			t.Fatalf("record frame of stream %v (record's %v), not an outbox stream of %v", f["stream"], rec["stream"], n.OutboxStreams())
		}
		seen[fmt.Sprint(rec["id"])] = true
		pos.Seen(fmt.Sprint(f["stream"]), num(f["seq"]))
	}
	if groups > 1 && len(pos) < 2 {
		t.Fatalf("the first %d outputs came from stream(s) %v only: the test proves nothing", half, pos)
	}
	// State: from every bucket's current documents ({}), then the changes.
	c.write(map[string]any{"type": "subscribe", "sub": "s", "topic": "state", "kind": "counter", "positions": map[string]any{}})
	c.next("subscribed s", func(f map[string]any) bool { return f["type"] == "subscribed" && f["sub"] == "s" })
	statePos := actor.Positions{}
	for range refs {
		f := c.next("state", isType("state"))
		ref, _ := records.ParseRef(fmt.Sprint(f["effector"]))
		if f["bucket"] != n.StateBucketFor(ref) {
			t.Fatalf("state frame of %s from bucket %v, want %s", ref, f["bucket"], n.StateBucketFor(ref))
		}
		statePos.Seen(fmt.Sprint(f["bucket"]), num(f["revision"]))
	}
	_ = c.ws.Close(websocket.StatusNormalClosure, "bye")
	<-c.done

	sendAll(more) // while disconnected
	total += len(refs) * more
	all := map[string]at{}
	recs, err := e.actors.SubscribeKind(ctx, "counter", actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		if all[rec.ID] = (at{rec.Stream, rec.Seq}); len(all) == total {
			break
		}
	}

	// Resume the outbox: exactly the outputs at or after the positions.
	c2 := e.dial(t, nil)
	c2.next("welcome", isType("welcome"))
	c2.write(map[string]any{"type": "subscribe", "sub": "o", "topic": "outbox", "kind": "counter", "positions": pos})
	if got := positionsOf(c2.next("subscribed", isType("subscribed"))); !maps.Equal(got, withStarts(pos, n.OutboxStreams())) {
		t.Fatalf("subscribed from %v: positions %v", pos, got)
	}
	expect := map[string]bool{}
	for id, a := range all {
		if a.seq >= pos.At(a.stream) {
			expect[id] = true
		}
	}
	if len(expect) != total-half {
		t.Fatalf("%d outputs at or after %v of %d, want %d", len(expect), pos, total, total-half)
	}
	last := map[string]uint64{}
	for range expect {
		f := c2.next("resumed record", isType("record"))
		stream, seq, id := fmt.Sprint(f["stream"]), num(f["seq"]), fmt.Sprint(f["record"].(map[string]any)["id"])
		switch {
		case seen[id]:
			t.Fatalf("resumed from %v: record %s (%s:%d) twice", pos, id, stream, seq)
		case !expect[id]:
			t.Fatalf("resumed from %v: record %s (%s:%d) before the positions or not of the test", pos, id, stream, seq)
		case seq <= last[stream]:
			t.Fatalf("resumed from %v: %s:%d after %s:%d", pos, stream, seq, stream, last[stream])
		}
		seen[id], last[stream] = true, seq
	}
	// The next frame is live: the output of a record sent now.
	sentinel := e.sendInc(t, refs[0], "inc", "", 1)[0]
	if f := c2.next("live record", isType("record")); f["record"].(map[string]any)["cause"] != sentinel.ID {
		t.Fatalf("after the resumed records: %v, want the output of %s", f, sentinel.ID)
	}
	if _, err := e.actors.StateAt(ctx, refs[0], sentinel.Seq); err != nil {
		t.Fatal(err)
	}

	// Resume the state: exactly the changes at or after the positions
	// that the buckets keep.
	stateExpect := stateChanges(t, e, statePos)
	c2.write(map[string]any{"type": "subscribe", "sub": "s", "topic": "state", "kind": "counter", "positions": statePos})
	c2.next("subscribed s", func(f map[string]any) bool { return f["type"] == "subscribed" && f["sub"] == "s" })
	got := map[at]bool{}
	for range stateExpect {
		f := c2.next("resumed state", isType("state"))
		a := at{fmt.Sprint(f["bucket"]), num(f["revision"])}
		if got[a] || !stateExpect[a] {
			t.Fatalf("resumed state from %v: %v twice, before the positions or not of the test (want %v)", statePos, a, stateExpect)
		}
		got[a] = true
	}
	if len(stateExpect) < len(refs)*more/2 {
		t.Fatalf("%d state changes after %v: the test proves little", len(stateExpect), statePos)
	}

	// A kind-wide outbox from now names every stream's next sequence.
	now, err := e.actors.OutboxPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2.write(map[string]any{"type": "subscribe", "sub": "now", "topic": "outbox", "kind": "counter"})
	if got := positionsOf(c2.next("subscribed now", func(f map[string]any) bool { return f["type"] == "subscribed" && f["sub"] == "now" })); !maps.Equal(got, now) {
		t.Fatalf("subscribed from now: positions %v, want %v", got, now)
	}

	// Bad positions, and positions where they do not apply.
	other := "EA_OUT_0_OF_3"
	if groups > 1 {
		other = "EA_OUT"
	}
	for i, tc := range []struct {
		frame map[string]any
		want  string
	}{
		{map[string]any{"topic": "outbox", "kind": "counter", "positions": map[string]any{"EA_OUT_7_OF_3": 1}}, "EA_OUT_7_OF_3"},
		{map[string]any{"topic": "outbox", "kind": "counter", "positions": map[string]any{other: 1}}, `"` + other + `"`},
		{map[string]any{"topic": "outbox", "kind": "counter", "positions": map[string]any{n.MailboxStreamOf(0): 1}}, n.MailboxStreamOf(0)},
		{map[string]any{"topic": "outbox", "kind": "counter", "positions": map[string]any{n.OutboxStreamOf(0): 0}}, "is 0"},
		{map[string]any{"topic": "outbox", "kind": "counter", "positions": map[string]any{n.OutboxStreamOf(0): -1}}, "positions"},
		{map[string]any{"topic": "outbox", "kind": "counter", "positions": map[string]any{n.OutboxStreamOf(0): 2}, "from": 2}, "not both"},
		{map[string]any{"topic": "outbox", "effector": refs[0].String(), "positions": map[string]any{n.OutboxStreamOf(0): 2}}, "with \"kind\" only"},
		{map[string]any{"topic": "mailbox", "effector": refs[0].String(), "positions": map[string]any{n.MailboxStreamOf(0): 2}}, "does not take \"positions\""},
		{map[string]any{"topic": "state", "kind": "counter", "positions": map[string]any{n.OutboxStreamOf(0): 2}}, n.OutboxStreamOf(0)},
		{map[string]any{"topic": "state", "kind": "counter", "positions": map[string]any{n.StateBucketOf(0): 2}, "from": 2}, "not both"},
		{map[string]any{"topic": "state", "effector": refs[0].String(), "positions": map[string]any{n.StateBucketOf(0): 2}}, "with \"kind\" only"},
	} {
		sub := fmt.Sprint("bad", i)
		tc.frame["type"], tc.frame["sub"] = "subscribe", sub
		c2.write(tc.frame)
		f := c2.next("refusal of "+sub, func(f map[string]any) bool { return f["sub"] == sub })
		if f["type"] != "error" || f["code"] != "bad_request" || !strings.Contains(fmt.Sprint(f["error"]), tc.want) {
			t.Fatalf("%v: %v, want bad_request saying %q", tc.frame, f, tc.want)
		}
	}
	if groups > 1 {
		for _, topic := range []string{"outbox", "state"} {
			sub := "from-" + topic
			c2.write(map[string]any{"type": "subscribe", "sub": sub, "topic": topic, "kind": "counter", "from": 3})
			f := c2.next("refusal of "+sub, func(f map[string]any) bool { return f["sub"] == sub })
			if f["code"] != "bad_request" || !strings.Contains(fmt.Sprint(f["error"]), "\"positions\"") {
				t.Fatalf("%s with kind and from with groups: %v, want bad_request pointing to \"positions\"", topic, f)
			}
		}
	}
}

// positionsOf reads a subscribed frame's positions.
func positionsOf(f map[string]any) actor.Positions {
	p := actor.Positions{}
	m, _ := f["positions"].(map[string]any)
	for s, v := range m {
		p[s] = num(v)
	}
	return p
}

// startAll is every one of streams at 1.
func startAll(streams []string) actor.Positions {
	p := actor.Positions{}
	for _, s := range streams {
		p[s] = 1
	}
	return p
}

// withStarts is p with every one of streams it does not name at 1.
func withStarts(p actor.Positions, streams []string) actor.Positions {
	out := startAll(streams)
	maps.Copy(out, p)
	return out
}

// stateChanges returns the revisions of counter state documents the state
// buckets keep at or after p's positions, and of a bucket p does not name
// the latest revision of each document.
func stateChanges(t *testing.T, e *env, p actor.Positions) map[at]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out := map[at]bool{}
	for g, name := range e.conn.Names().StateBuckets() {
		_, named := p[name]
		latest := map[string]uint64{}
		kv, err := e.conn.StateBucketOf(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		w, err := kv.Watch(ctx, "counter.*", jetstream.IncludeHistory())
		if err != nil {
			t.Fatal(err)
		}
		for ent := range w.Updates() {
			if ent == nil {
				break
			}
			latest[ent.Key()] = ent.Revision()
			if named && ent.Revision() >= p[name] {
				out[at{name, ent.Revision()}] = true
			}
		}
		for _, rev := range latest {
			if !named {
				out[at{name, rev}] = true
			}
		}
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
