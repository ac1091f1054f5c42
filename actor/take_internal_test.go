package actor

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/effectors/effectors/records"
)

// takeOneByOne is take as it was written before: the first high-priority
// record held, else the first, removed one at a time. take must choose the
// same records in the same order.
func takeOneByOne(held []delivery, n int) (out, rest []delivery) {
	held = slices.Clone(held)
	for len(out) < n && len(held) > 0 {
		i := 0
		for j, d := range held {
			if d.rec.Priority == records.PriorityHigh {
				i = j
				break
			}
		}
		out = append(out, held[i])
		held = slices.Delete(held, i, i+1)
	}
	return out, held
}

func seqs(ds []delivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.seq
	}
	return out
}

// TestTakeOrder: take returns high-priority records first, then stream
// order, up to n, and leaves the rest held in order, for random mixes.
func TestTakeOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var held []delivery
		for i := range r.IntN(300) {
			d := delivery{seq: uint64(i + 1)}
			if r.IntN(10) == 0 {
				d.rec.Priority = records.PriorityHigh
			}
			held = append(held, d)
		}
		n := r.IntN(80)
		wantOut, wantRest := takeOneByOne(held, n)
		e := &effector{held: slices.Clone(held)}
		got := e.take(n)
		if !slices.Equal(seqs(got), seqs(wantOut)) || !slices.Equal(seqs(e.held), seqs(wantRest)) {
			t.Fatalf("round %d, n=%d: take = %v, held %v; want %v, held %v", round, n, seqs(got), seqs(e.held), seqs(wantOut), seqs(wantRest))
		}
		if len(e.held) == 0 && e.held != nil {
			t.Fatalf("round %d: held is empty but not nil", round)
		}
	}
}
