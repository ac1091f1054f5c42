package task_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/records"
)

// BenchmarkStreamRecords measures how many task.chunk records a run of
// 1,000 streamed chunks publishes on a task effector over NATS, one record
// per chunk (before: core.NoCoalesce) against the default coalescing
// (after: at most 50ms or 2 KiB), for a burst (a model faster than the
// publishes) and for a chunk every 1ms and every 5ms (about 1,000 and 200
// tokens a second). records/1000chunks is the figure; ns/op a whole run.
//
//	go test -run XXX -bench BenchmarkStreamRecords -benchtime 3x ./core/task/
func BenchmarkStreamRecords(b *testing.B) {
	srv := bustest.NewServer(b)
	paces := []time.Duration{0, time.Millisecond, 5 * time.Millisecond}
	var kinds []actor.Definition
	name := func(p time.Duration, c string) string { return fmt.Sprintf("p%d-%s", p.Microseconds(), c) }
	for _, p := range paces {
		kinds = append(kinds,
			task.Kind(name(p, "before"), chunker(1000, false, p), task.CoalesceText(core.NoCoalesce)),
			task.Kind(name(p, "after"), chunker(1000, false, p)))
	}
	actortest.StartNode(b, srv.Connect(b), actor.Options{}, kinds...)
	client, err := actor.NewClient(b.Context(), srv.Connect(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range paces {
		pace := "burst"
		if p > 0 {
			pace = "every-" + p.String()
		}
		for _, c := range []string{"before", "after"} {
			b.Run(pace+"/"+c, func(b *testing.B) {
				ref := records.Ref{Kind: name(p, c), ID: "b1"}
				if _, err := client.Create(b.Context(), ref, nil); err != nil {
					b.Fatal(err)
				}
				chunks := 0
				for b.Loop() {
					_, _, done := runRecords(b, client, ref)
					chunks += done.Chunks
				}
				b.ReportMetric(float64(chunks)/float64(b.N), "records/1000chunks")
			})
		}
	}
}
