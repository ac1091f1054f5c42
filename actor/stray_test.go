package actor_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// TestStrayWaitsWithoutHoldingUpItsPartition: a record on a mailbox
// subject with an id outside the contract goes to dead letters (under
// <kind>._); while dead letters cannot be
// written (their stream is gone), it is handed back to the server for a
// later delivery instead of holding up the partition's other effectors
// (before, the delivery callback retried for up to 30s), and once the
// stream is back it is dead-lettered, not lost.
func TestStrayWaitsWithoutHoldingUpItsPartition(t *testing.T) {
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	names := conn.Names()
	// A counter, and a stray id on the same partition.
	ok, other := ref("counter", "s1"), records.Ref{}
	for i := 0; other.ID == ""; i++ {
		if r := ref("counter", "x%"+strconv.Itoa(i)); names.Partition(r) == names.Partition(ok) {
			other = r
		}
	}
	if _, err := c.Create(ctxT(t), ok, nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.JetStream().DeleteStream(ctxT(t), names.DeadStream()); err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("ea.mbox.counter." + other.ID)
	msg.Header.Set("EA-Type", "inc")
	msg.Header.Set("Content-Type", records.ContentJSON)
	msg.Data = []byte(`{"by":1}`)
	if _, err := conn.JetStream().PublishMsg(ctxT(t), msg); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, ok, 3)
	// Well inside the 30s the delivery callback used to retry for.
	waitCount(t, conn, c, ok, 3, 15*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	// DeadLetters follows: the first one is enough.
	dead, err := c.DeadLetters(ctx, ref("counter", "_"))
	if err != nil {
		t.Fatal(err)
	}
	for d, err := range dead {
		if err != nil {
			t.Fatalf("the stray record never reached dead letters: %v", err)
		}
		if d.Reason != "bad_subject" {
			t.Fatalf("stray dead-lettered with reason %q, want bad_subject", d.Reason)
		}
		break
	}
	checkCountOutputs(t, conn, ok, upTo(3))
}
