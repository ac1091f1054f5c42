package actor

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/effectors/effectors/records"
)

// TestTakeOrder: take returns high-priority records first, then the others,
// each in the order held keeps, and leaves the rest held in order: the same
// as picking one record at a time (the first high-priority one, else the
// first), over random mixes and batch sizes.
func TestTakeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		held := make([]delivery, rng.IntN(40))
		for i := range held {
			held[i].seq = uint64(i + 1)
			if rng.IntN(4) == 0 {
				held[i].rec.Priority = records.PriorityHigh
			}
		}
		n := rng.IntN(50)
		wantOut, wantRest := takeOneByOne(slices.Clone(held), n)
		e := &effector{held: slices.Clone(held)}
		out := e.take(n)
		if !slices.Equal(seqs(out), seqs(wantOut)) || !slices.Equal(seqs(e.held), seqs(wantRest)) {
			t.Fatalf("round %d, take(%d) of %v: took %v, left %v; want %v, %v", round, n, describe(held), seqs(out), seqs(e.held), seqs(wantOut), seqs(wantRest))
		}
		if len(e.held) == 0 && e.held != nil {
			t.Fatalf("round %d: held is empty but not nil", round)
		}
	}
}

// takeOneByOne is take as one pick at a time.
func takeOneByOne(held []delivery, n int) (out, rest []delivery) {
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
	out := []uint64{}
	for _, d := range ds {
		out = append(out, d.seq)
	}
	return out
}

func describe(ds []delivery) []string {
	var out []string
	for _, d := range ds {
		s := "."
		if d.rec.Priority == records.PriorityHigh {
			s = "H"
		}
		out = append(out, s)
	}
	return out
}

// BenchmarkTake: a busy effector's held records in steady state, a window
// of 256: take a batch (64, or 1 as with Kind.MaxBatch 1), and as many
// records arrive behind them. Reported per record taken.
func BenchmarkTake(b *testing.B) {
	for _, n := range []int{64, 1} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			e := &effector{}
			seq := uint64(0)
			arrive := func(k int) {
				for range k {
					seq++
					e.held = append(e.held, delivery{seq: seq})
				}
			}
			arrive(256)
			for b.Loop() {
				arrive(len(e.take(n)))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}
