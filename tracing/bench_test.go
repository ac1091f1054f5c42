package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/tracing"
)

// BenchmarkApplyHop is actor's BenchmarkApplyHop (read the record, run the
// logic, write the output's headers) with the kind traced by Middleware:
// off (a nil Tracer, what Setup returns with tracing off) and on (the SDK,
// every span sampled, batched to an exporter that drops them).
func BenchmarkApplyHop(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	for _, bc := range []struct {
		name   string
		tracer *tracing.Tracer
	}{{"off", nil}, {"on", tracing.New(tp)}} {
		b.Run(bc.name, func(b *testing.B) {
			k := actor.Kind[int]{Name: "counter", Logic: func(c *actor.Context, n int) (int, error) {
				return n + 1, c.Emit("count", n+1)
			}}.With(tracing.Middleware[int](bc.tracer))
			in, err := records.New("inc", map[string]int{"by": 1})
			if err != nil {
				b.Fatal(err)
			}
			h := in.Header()
			h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
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
