package actor_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

// signedTag is the tag a node appends to an output id: <input id>:<n>.<tag>.
var signedTag = regexp.MustCompile(`^[0-9a-f]{20}$`)

// TestOutputIDForgery is finding 4 of issue 9: a client that could predict
// the id of an output the node will send to a mailbox could publish a
// record with that id first, and JetStream's duplicate window would drop the
// real output. The ids the runtime used to give (<input id>:<n>, with
// s<seq> for an input without an id) are pre-published here for every
// output the test then causes; none suppresses the real one, whose id
// carries a tag the client cannot compute without the node's key.
func TestOutputIDForgery(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	ctx := ctxT(t)
	ctl, victim := ref("controller", "ctl"), ref("counter", "victim")
	for _, r := range []records.Ref{ctl, victim} {
		if _, err := c.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	forge := func(id string) {
		t.Helper()
		rec, err := records.New("inc", kinds.Inc{By: new(int64)}) // by 0: harmless, but it takes the id
		if err != nil {
			t.Fatal(err)
		}
		rec.ID = id
		if _, err := conn.JetStream().PublishMsg(ctx, rec.Msg(conn.Names().Mailbox(victim))); err != nil {
			t.Fatal(err)
		}
	}

	// 1. An input with an id the client chose: its outputs used to be <id>:<n>.
	for i := range 3 {
		forge(fmt.Sprintf("start-1:%d", i))
	}
	start, _ := records.New("start", kinds.Start{Counter: victim.ID, Times: 3})
	start.ID = "start-1"
	if _, err := c.Send(ctx, ctl, start); err != nil {
		t.Fatal(err)
	}
	// The forged incs (by 0) each say count 0; none suppressed a real output.
	waitCountSaid(t, conn, c, victim, 3, []int64{0, 0, 0, 1, 2, 3}, 30*time.Second)

	// 2. An input without an id: the runtime names it s<seq>, and its outputs
	// used to be s<seq>:<n>, predictable from the sequence the publish ack
	// reports (the next sequence is the one after the forged records).
	info, err := conn.JetStream().Stream(ctx, conn.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	next := info.CachedInfo().State.LastSeq + 3 // after the two forged records below
	forge(fmt.Sprintf("s%d:0", next))
	forge(fmt.Sprintf("s%d:1", next))
	bare, _ := records.New("start", kinds.Start{Counter: victim.ID, Times: 2})
	msg := bare.Msg(conn.Names().Mailbox(ctl))
	msg.Header.Del(records.HeaderID)
	ack, err := conn.JetStream().PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sequence != next {
		t.Fatalf("the id-less start is sequence %d, the forged ids named %d", ack.Sequence, next)
	}
	waitCountSaid(t, conn, c, victim, 5, []int64{0, 0, 0, 1, 2, 3, 3, 3, 4, 5}, 30*time.Second)

	// Every inc the controller sent is stored, under a signed id.
	signed := 0
	for _, id := range outputs(t, conn, conn.Names().Mailbox(victim)) {
		for _, in := range []string{"start-1", fmt.Sprintf("s%d", next)} {
			if m := regexp.MustCompile(`^` + regexp.QuoteMeta(in) + `:\d+\.(.*)$`).FindStringSubmatch(id); m != nil && signedTag.MatchString(m[1]) {
				signed++
			}
		}
	}
	if signed != 5 {
		t.Errorf("%d signed outputs of the controller in the victim's mailbox, want 5", signed)
	}
}

// TestOutputIDReusedInputID: two effectors whose inputs carry the same id
// (a publisher reusing ids after the duplicate window) used to emit outputs
// with the same ids, and the second effector's output was dropped when both
// were emitted within the window. Their ids now differ by effector and input.
func TestOutputIDReusedInputID(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, bus.Config{DuplicateWindow: 500 * time.Millisecond})
	ctx := ctxT(t)
	node := startNode(t, conn, nil)
	c := newClient(t, conn)
	ctlA, ctlB, cA, cB := ref("controller", "a"), ref("controller", "b"), ref("counter", "a"), ref("counter", "b")
	for _, r := range []records.Ref{ctlA, ctlB, cA, cB} {
		if _, err := c.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	node.Stop(t) // the inputs wait: both are processed back to back, within one window
	for i, r := range []struct{ ctl, counter records.Ref }{{ctlA, cA}, {ctlB, cB}} {
		if i > 0 {
			time.Sleep(600 * time.Millisecond) // past the window: the same id is stored again
		}
		start, _ := records.New("start", kinds.Start{Counter: r.counter.ID, Times: 1})
		start.ID = "job-1"
		if _, err := c.Send(ctx, r.ctl, start); err != nil {
			t.Fatal(err)
		}
	}
	startNode(t, conn, nil)
	waitCount(t, conn, c, cA, 1, 30*time.Second)
	waitCount(t, conn, c, cB, 1, 30*time.Second)
}
