package actor_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
)

// TestBatchedStateLoads reads many state documents at once, as effectors
// taken over in a failover do, and checks that each load returns what one
// KV get of the key returns (document, revision, or the same kind of
// error: not found for a missing or deleted key, corrupt for junk or for a
// document naming another effector), and that loads were batched.
func TestBatchedStateLoads(t *testing.T) {
	_, conn := server(t)
	node := startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	refs := createCounters(t, c, 300)
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	junk, mismatch, gone, never := ref("counter", "junk"), ref("counter", "mismatch"), ref("counter", "gone"), ref("counter", "never")
	putJunk(t, conn, junk, []byte("junk"))
	c0, err := bucket.Get(ctx, conn.Names().StateKey(refs[0]))
	if err != nil {
		t.Fatal(err)
	}
	putJunk(t, conn, mismatch, c0.Value()) // names c0
	if _, err := c.Create(ctx, gone, nil); err != nil {
		t.Fatal(err)
	}
	if err := bucket.Delete(ctx, conn.Names().StateKey(gone)); err != nil {
		t.Fatal(err)
	}
	all := append([]records.Ref{junk, mismatch, gone, never}, refs...)

	class := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, kv.ErrNotFound):
			return "not found"
		case errors.Is(err, actor.ErrStateMismatch):
			return "mismatch"
		case errors.Is(err, actor.ErrCorruptState):
			return "corrupt"
		}
		return err.Error()
	}
	type result struct {
		doc   actor.Document
		rev   uint64
		class string
	}
	got := make([]result, len(all))
	var wg sync.WaitGroup
	for i, r := range all {
		wg.Go(func() {
			doc, rev, err := node.Node.LoadState(ctx, r)
			got[i] = result{doc, rev, class(err)}
		})
	}
	wg.Wait()
	for i, r := range all {
		doc, rev, err := node.Node.GetState(ctx, r)
		want := result{doc, rev, class(err)}
		if got[i].class != want.class || got[i].rev != want.rev || got[i].doc.ID != want.doc.ID || got[i].doc.Seq != want.doc.Seq ||
			fmt.Sprint(got[i].doc.State) != fmt.Sprint(want.doc.State) {
			t.Errorf("%s: batched load gave %s rev %d %+v; a KV get gives %s rev %d %+v", r, got[i].class, got[i].rev, got[i].doc, want.class, want.rev, want.doc)
		}
	}
	if want := []string{"corrupt", "mismatch", "not found", "not found"}; got[0].class != want[0] || got[1].class != want[1] || got[2].class != want[2] || got[3].class != want[3] {
		t.Errorf("junk, mismatch, deleted, missing: %s, %s, %s, %s; want %v", got[0].class, got[1].class, got[2].class, got[3].class, want)
	}
	b := node.Node.StatesBatched()
	t.Logf("%d of %d state documents read in batches", b, len(all))
	if b == 0 {
		t.Error("no state document was read in a batch")
	}
}

// BenchmarkStateLoads reads the state documents of 2,000 effectors at once,
// as a node does after taking over their partitions: one KV get each, all
// in parallel (how effectors loaded before), against Node.loadState, which
// batches them (multi_last direct gets). With -count, the two alternate in
// one run.
//
//	go test -run '^$' -bench BenchmarkStateLoads -benchtime 20x -count 3 ./actor
func BenchmarkStateLoads(b *testing.B) {
	const keys = 2000
	_, conn := server(b)
	node := startNode(b, conn, nil, kinds.Counter())
	bucket, err := conn.StateBucket(ctxT(b))
	if err != nil {
		b.Fatal(err)
	}
	refs := make([]records.Ref, keys)
	for i := range refs {
		refs[i] = ref("counter", fmt.Sprintf("b%d", i))
		data, err := codec.Marshal(actor.Document{ID: refs[i].ID, Kind: "counter", Status: actor.StatusIdle})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bucket.Put(ctxT(b), conn.Names().StateKey(refs[i]), data); err != nil {
			b.Fatal(err)
		}
	}
	ctx := ctxT(b)
	for _, way := range []struct {
		name string
		load func(records.Ref) error
	}{
		{"get", func(r records.Ref) error { _, _, err := node.Node.GetState(ctx, r); return err }},
		{"batched", func(r records.Ref) error { _, _, err := node.Node.LoadState(ctx, r); return err }},
	} {
		load := way.load
		b.Run(way.name, func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for _, r := range refs {
					wg.Go(func() {
						if err := load(r); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			b.ReportMetric(float64(keys*b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}
