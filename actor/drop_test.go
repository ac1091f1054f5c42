package actor_test

import (
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
)

// TestDropsOnlyUnderAVerifiedLease: a partition acknowledges records it
// does not apply (those of an effector reading its own mailbox) only while
// its lease at the server is the one it is read under. A reader whose lease was taken (another node
// with a wrong view of membership, say) no longer drops anything, even
// before it notices: the new reader's own-consumer bookkeeping cannot lose a
// record to it.
func TestDropsOnlyUnderAVerifiedLease(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	n := startNodeWith(t, conn, actor.Options{}, nil)
	ctx := ctxT(t)
	actortest.Eventually(t, 30*time.Second, "the partition may drop", func() bool {
		return n.Node.MayDrop("counter", 3)
	})
	// The reading under the lease as it is now: the node may open the
	// partition again under the lease written below (it names this node),
	// and that new reading may drop; this one must not.
	mayDrop := n.Node.DropCheck("counter", 3)
	if mayDrop == nil {
		t.Fatal("the node reads no partition counter/3")
	}
	place, err := conn.JetStream().KeyValue(ctx, conn.Names().PlaceBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := conn.Names().LeaseKey("counter", 3)
	ent, err := place.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Another node writes the lease over (as a node whose view of
	// membership is wrong would); the node has not read it yet, or has.
	if _, err := place.Update(ctx, key, ent.Value(), ent.Revision()); err != nil {
		t.Fatal(err)
	}
	// Its last reading of the lease at the server stays good for a moment,
	// then never again.
	actortest.Eventually(t, 10*time.Second, "the partition stops dropping", func() bool {
		return !mayDrop()
	})
	for range 5 {
		if mayDrop() {
			t.Fatal("the partition may drop again after its lease was written over")
		}
	}
}
