package actor_test

import (
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
)

// TestBlockedLogicDoesNotHoldUpNeighbours: logic that blocks on the first
// record of an idle partition does not hold up the partition's reading
// (partition.read): records of other effectors of the same partition,
// published while it blocks, are applied, each once; and the blocked record
// is applied once it is released.
func TestBlockedLogicDoesNotHoldUpNeighbours(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	kind := lagKind()
	kind.Logic = func(ctx *actor.Context, s lagState) (lagState, error) {
		if ctx.Self().ID == "slow" {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return s, ctx.Err()
			}
		}
		s.Count++
		return s, nil
	}
	startNode(t, conn, nil, kind)
	c := newClient(t, conn)
	slow := records.Ref{Kind: "lag", ID: "slow"}
	others := neighbours(conn.Names(), 10)
	for _, r := range append([]records.Ref{slow}, others...) {
		if _, err := c.Create(ctxT(t), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The partition is idle when this record arrives.
	publishIncs(t, conn, slow, 1)
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the slow effector's logic never ran")
	}
	const each = 5
	for _, r := range others {
		publishIncs(t, conn, r, each)
	}
	actortest.Eventually(t, time.Minute, "the neighbours served while slow blocks", func() bool {
		for _, r := range others {
			if lagCount(t, c, r) != each {
				return false
			}
		}
		return true
	})
	if got := lagCount(t, c, slow); got != 0 {
		t.Fatalf("slow applied %d records while its logic was blocked", got)
	}
	close(release)
	waitLag(t, c, slow, 1)
	// Exactly once: nothing more arrives later.
	publishIncs(t, conn, slow, 1)
	waitLag(t, c, slow, 2)
	for _, r := range others {
		if got := lagCount(t, c, r); got != each {
			t.Fatalf("%s applied %d records, want %d", r, got, each)
		}
	}
}

// TestDeletedPartitionConsumerIsReadAgain: the partition's consumer is
// deleted under a running node (an operator's mistake): the reading ends,
// the partition is opened again (its consumer made anew) and later records
// are applied, each once, with every output once.
func TestDeletedPartitionConsumerIsReadAgain(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	ref := records.Ref{Kind: "counter", ID: "deleted"}
	if _, err := c.Create(ctxT(t), ref, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, ref, 3)
	waitCount(t, conn, c, ref, 3, time.Minute)
	stream, err := conn.MailboxStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	name := conn.Names().PartitionConsumer(ref.Kind, conn.Names().Partition(ref))
	if err := stream.DeleteConsumer(ctxT(t), name); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, ref, 2)
	waitCount(t, conn, c, ref, 5, 2*time.Minute)
}
