package actor_test

import (
	"context"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// BenchmarkApplyHop is the in-process part of one hop: read the record
// from its headers (records.FromMsg), run a counter's logic that emits one
// output (Kind.Apply, where outputs are built), and write the output's
// headers (Record.Header), for an input without trace context (plain) and
// one with a traceparent (traceparent), as a traced caller sends. It
// compiles against the commits before tracing, so that tracing off can be
// compared with them in the same run (BENCHMARKS.md, "Tracing").
func BenchmarkApplyHop(b *testing.B) {
	k := actor.Kind[int]{Name: "counter", Logic: func(c *actor.Context, n int) (int, error) {
		return n + 1, c.Emit("count", n+1)
	}}
	for _, tp := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		name := "plain"
		if tp != "" {
			name = "traceparent"
		}
		b.Run(name, func(b *testing.B) {
			in, err := records.New("inc", map[string]int{"by": 1})
			if err != nil {
				b.Fatal(err)
			}
			h := in.Header()
			if tp != "" {
				h.Set("traceparent", tp)
			}
			self := records.Ref{Kind: "counter", ID: "c1"}
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				rec, err := records.FromMsg("ea.mbox.counter.c1", h, in.Payload)
				if err != nil {
					b.Fatal(err)
				}
				var outs []actor.Output
				if n, outs, err = k.Apply(ctx, self, rec, n); err != nil {
					b.Fatal(err)
				}
				_ = outs[0].Record.Header()
			}
		})
	}
}
