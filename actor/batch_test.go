package actor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
)

type tally struct {
	Seen []uint64 `json:"seen"`
}

// TestBatchWithTransientFailures: records waiting for one effector are
// applied in batches; when the logic fails once on a record in the middle of
// a batch, the records before it are committed, it is retried on its own
// with backoff, and batching goes on after it. Every record is applied once,
// in stream order, and nothing goes to dead letters.
func TestBatchWithTransientFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failed := map[uint64]bool{}
	kind := actor.Kind[tally]{
		Name:  "tally",
		Retry: actor.RetryPolicy{Backoff: 5 * time.Millisecond},
		Logic: func(ctx *actor.Context, s tally) (tally, error) {
			seq := ctx.Record().Seq
			mu.Lock()
			first := seq%7 == 0 && !failed[seq]
			failed[seq] = true
			mu.Unlock()
			if first {
				return s, errTransient
			}
			s.Seen = append(s.Seen, seq)
			return s, nil
		},
	}
	_, conn := server(t)
	n := startNode(t, conn, nil, kind)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	const total = 300
	publishIncs(t, conn, r, total)
	var s tally
	actortest.Eventually(t, 3*time.Minute, "every record applied", func() bool {
		doc, err := c.State(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return len(s.Seen) >= total
	})
	if len(s.Seen) != total {
		t.Fatalf("%d records applied, want %d", len(s.Seen), total)
	}
	for i := 1; i < len(s.Seen); i++ {
		if s.Seen[i] <= s.Seen[i-1] {
			t.Fatalf("applied out of order or twice: %d after %d", s.Seen[i], s.Seen[i-1])
		}
	}
	if got := metricSum(t, n.Registry, "ea_logic_retries_total", "kind", "tally"); got < total/7-1 {
		t.Fatalf("%v retries, want about %d: the failures were not retried", got, total/7)
	}
	if got := metricSum(t, n.Registry, "ea_dead_letters_total"); got != 0 {
		t.Fatalf("%v dead letters, want none", got)
	}
	// The count moves once a batch is acknowledged, just after its state
	// write shows: wait for it, then want it exact.
	processed := func() float64 {
		return metricSum(t, n.Registry, "ea_records_processed_total", "kind", "tally", "outcome", "ok")
	}
	actortest.Eventually(t, 10*time.Second, "every record counted", func() bool { return processed() >= total })
	if got := processed(); got != total {
		t.Fatalf("ea_records_processed_total{ok} = %v, want %d", got, total)
	}
	// Batches happened: the state document was written far fewer times than
	// there were records (only this effector writes to the bucket here).
	bucket, err := conn.StateBucket(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(ctxT(t), "tally.t1")
	if err != nil {
		t.Fatal(err)
	}
	if writes := ent.Revision(); writes > total/2 {
		t.Fatalf("%d state writes for %d records: no batching", writes, total)
	}
	t.Logf("%d records applied with %d state writes", total, ent.Revision())
}

var errTransient = transientError("a transient failure")

type transientError string

func (e transientError) Error() string { return string(e) }
