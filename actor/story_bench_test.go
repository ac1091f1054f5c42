package actor_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkStateRecords measures what Kind.StateRecords costs: the same
// tally kind (one output per record) with and without state records, 16
// effectors, records published asynchronously and the clock stopped once
// every one is applied. With batching (MaxBatch 64) a state record is
// written per batch; with MaxBatch 1 per record, the worst case. Report the
// ratio on/off of the same MaxBatch, run in the same invocation:
//
//	go test -run '^$' -bench BenchmarkStateRecords -benchtime 20000x -count 3 ./actor/
func BenchmarkStateRecords(b *testing.B) {
	for _, batch := range []int{64, 1} {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("batch=%d/states=%v", batch, on)
			b.Run(name, func(b *testing.B) { benchTally(b, on, batch) })
		}
	}
}

func benchTally(b *testing.B, states bool, batch int) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	startNodeWith(b, conn, actor.Options{Logger: slog.New(slog.DiscardHandler)}, nil, tallyKind(states, batch))
	c := newClient(b, conn)
	const effectors = 16
	refs := make([]records.Ref, effectors)
	for i := range refs {
		refs[i] = ref("tally", fmt.Sprint("t", i))
		if _, err := c.Create(ctxT(b), refs[i], nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var futures []jetstream.PubAckFuture
	wait := func() {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		futures = futures[:0]
	}
	for i := range b.N {
		rec, _ := records.New("tick", nil)
		f, err := conn.JetStream().PublishMsgAsync(rec.Msg(conn.Names().Mailbox(refs[i%effectors])))
		if err != nil {
			b.Fatal(err)
		}
		if futures = append(futures, f); len(futures) == 1000 {
			wait()
		}
	}
	wait()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		total := 0
		for _, r := range refs {
			doc, err := c.State(ctxT(b), r)
			if err != nil {
				b.Fatal(err)
			}
			var s tallyState
			if err := doc.Decode(&s); err != nil {
				b.Fatal(err)
			}
			total += s.N
		}
		if total == b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d applied after 5 minutes", total, b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
}
