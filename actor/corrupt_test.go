package actor_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

// waitDead waits until r has n dead letters and checks the reason of those
// from the from-th on (counting from 0); it returns them.
func waitDead(t *testing.T, c *actor.Client, r records.Ref, from, n int, reason string) []actor.DeadLetter {
	t.Helper()
	dead, err := c.DeadLetters(ctxT(t), r, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	var got []actor.DeadLetter
	for dl, err := range dead {
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= from && dl.Reason != reason {
			t.Fatalf("%s: dead letter reason %q (%s), want %q", r, dl.Reason, dl.Error, reason)
		}
		if got = append(got, dl); len(got) == n {
			break
		}
	}
	return got[from:]
}

// putJunk writes junk as r's state document, as `nats kv put` would.
func putJunk(t *testing.T, conn *bus.Conn, r records.Ref, junk []byte) {
	t.Helper()
	bucket, err := conn.StateBucket(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Put(ctxT(t), conn.Names().StateKey(r), junk); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptState: a state document that does not decode (`nats kv put
// ea_state counter.x junk`) does not wedge its effector: reading it is
// ErrCorruptState, its records go to dead letters (corrupt_state) and are not
// retried, create says it is corrupt and how to fix it, reset repairs it
// without replaying what was applied, and terminate works on it.
func TestCorruptState(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	x, other := ref("counter", "x"), ref("counter", "other")
	for _, r := range []records.Ref{x, other} {
		if _, err := c.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	publishIncs(t, conn, x, 2)
	waitCount(t, conn, c, x, 2, 20*time.Second)

	// Corrupted while loaded: the node finds out at its next write.
	putJunk(t, conn, x, []byte("junk"))
	_, err := c.State(ctx, x)
	var cs *actor.CorruptStateError
	if !errors.Is(err, actor.ErrCorruptState) || !errors.As(err, &cs) || cs.Key != "counter.x" || cs.Revision == 0 {
		t.Fatalf("state of x: %v, want a *CorruptStateError of counter.x", err)
	}
	publishIncs(t, conn, x, 2)
	dl := waitDead(t, c, x, 0, 2, "corrupt_state")
	if !strings.Contains(dl[0].Error, "reset it with ea.ctl.reset.counter") {
		t.Errorf("dead letter error %q does not say how to repair", dl[0].Error)
	}
	// The other effector of the kind is served meanwhile.
	publishIncs(t, conn, other, 3)
	waitCount(t, conn, c, other, 3, 20*time.Second)
	// The records the node found the junk with may have been applied on the
	// cached state, their outputs published, before the write failed (they
	// then went to dead letters): x's outbox says 1, 2, then 3 and 4 at most.
	said := saidCounts(t, conn, x)
	if !slices.Equal(said, []int64{1, 2}) && !slices.Equal(said, []int64{1, 2, 3}) && !slices.Equal(said, []int64{1, 2, 3, 4}) {
		t.Fatalf("outputs of x say counts %v, want 1 and 2, then 3 and 4 at most", said)
	}

	// Create says what is wrong and what to do.
	_, err = c.Create(ctx, x, nil)
	var ce *actor.ControlError
	if !errors.Is(err, actor.ErrExists) || !errors.As(err, &ce) || ce.Code != 409 ||
		!strings.Contains(ce.Message, "corrupt") || !strings.Contains(ce.Message, "ea.ctl.reset.counter") {
		t.Fatalf("create on a corrupt document: %v, want 409 saying it is corrupt and how to reset it", err)
	}

	// Reset: the cursor comes from the mailbox, so the records refused
	// meanwhile (in dead letters) are not applied on the new state.
	doc, err := c.Reset(ctx, x, kinds.CounterState{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != actor.StatusIdle || doc.Seq != dl[1].Seq {
		t.Fatalf("reset: status %s seq %d, want IDLE at seq %d (the last record of the mailbox)", doc.Status, doc.Seq, dl[1].Seq)
	}
	publishIncs(t, conn, x, 1)
	said = append(said, 11)
	waitCountSaid(t, conn, c, x, 11, said, 20*time.Second)

	// A reset of a valid document keeps its cursor.
	before, err := c.State(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err = c.Reset(ctx, x, nil); err != nil || doc.Seq != before.Seq {
		t.Fatalf("reset of a valid document: seq %d, %v; want seq %d", doc.Seq, err, before.Seq)
	}
	publishIncs(t, conn, x, 1)
	said = append(said, 1)
	waitCountSaid(t, conn, c, x, 1, said, 20*time.Second)

	// A document naming another effector is repaired by reset too.
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(ctx, conn.Names().StateKey(other))
	if err != nil {
		t.Fatal(err)
	}
	putJunk(t, conn, x, ent.Value())
	if _, err := c.State(ctx, x); !errors.Is(err, actor.ErrStateMismatch) || !errors.Is(err, actor.ErrCorruptState) {
		t.Fatalf("state of x holding other's document: %v", err)
	}
	if _, err := c.Reset(ctx, x, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, x, 1)
	said = append(said, 1)
	waitCountSaid(t, conn, c, x, 1, said, 20*time.Second)

	// Terminate writes a valid TERMINATED document over a corrupt one.
	putJunk(t, conn, x, []byte{0xc1}) // never valid msgpack
	doc, err = c.Terminate(ctx, x)
	if err != nil || doc.Status != actor.StatusTerminated {
		t.Fatalf("terminate of a corrupt document: %+v %v", doc, err)
	}
	if got, err := c.State(ctx, x); err != nil || got.Status != actor.StatusTerminated || got.ID != "x" {
		t.Fatalf("after terminate: %+v %v", got, err)
	}
	publishIncs(t, conn, x, 1)
	waitDead(t, c, x, 2, 3, "terminated")

	// Reset refuses what it cannot repair.
	if _, err := c.Reset(ctx, x, nil); !errors.Is(err, actor.ErrTerminated) {
		t.Errorf("reset of a terminated effector: %v, want ErrTerminated", err)
	}
	if _, err := c.Reset(ctx, ref("counter", "nobody"), nil); !errors.Is(err, actor.ErrNotFound) {
		t.Errorf("reset of an unknown effector: %v, want ErrNotFound", err)
	}
	if _, err := c.Reset(ctx, other, map[string]string{"count": "no"}); !errors.Is(err, actor.ErrInvalid) {
		t.Errorf("reset with a bad state: %v, want ErrInvalid", err)
	}
	if got := count(t, c, other); got != 3 {
		t.Errorf("other counted %d, want 3", got)
	}
}

// TestControlHugeRequest: a control request echoing a huge value still gets
// a short 400 reply.
func TestControlHugeRequest(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, kinds.Counter())
	long := strings.Repeat("x", 900_000)
	for _, body := range []string{`{"` + long + `":1}`, `{"id":"` + long + `"}`} {
		for _, op := range []string{"create", "terminate", "reset"} {
			msg, err := conn.NATS().Request(conn.Names().Control(op, "counter"), []byte(body), 10*time.Second)
			if err != nil {
				t.Fatalf("%s: no reply: %v", op, err)
			}
			text := msg.Header.Get("Nats-Service-Error")
			if code := msg.Header.Get("Nats-Service-Error-Code"); code != "400" || len(text) > 1100 {
				t.Errorf("%s: code %q, %d-byte text %.200q", op, code, len(text), text)
			}
		}
	}
}
