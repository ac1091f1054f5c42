package tracectx_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/records"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestRoundTrip: a record's trace context read as a remote span context
// and written back is the same, tracestate included; a context without a
// span leaves a record as it is.
func TestRoundTrip(t *testing.T) {
	in := records.Record{TraceParent: parent, TraceState: "rojo=00f067aa0ba902b7"}
	ctx := tracectx.Extract(context.Background(), in)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("extracted %v: want a valid, remote, sampled span context", sc)
	}
	var out records.Record
	if !tracectx.Inject(ctx, &out) || out.TraceParent != parent || out.TraceState != in.TraceState {
		t.Fatalf("injected %q %q, want %q %q", out.TraceParent, out.TraceState, parent, in.TraceState)
	}
	keep := records.Record{TraceParent: parent}
	if tracectx.Inject(context.Background(), &keep) || keep.TraceParent != parent {
		t.Fatalf("a context without a span changed the record: %q", keep.TraceParent)
	}
	if tracectx.Tracer(ctx, "x") != nil {
		t.Fatal("Tracer of a remote span context: want nil (nothing recording)")
	}
}

// TestHeaders: a request's trace headers are honoured when well formed and
// ignored otherwise.
func TestHeaders(t *testing.T) {
	h := nats.Header{}
	h.Set(records.HeaderTraceParent, parent)
	h.Set(records.HeaderTraceState, "bad state\x01")
	ctx := tracectx.ExtractHeader(context.Background(), h)
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID().String() != parent[3:35] || sc.TraceState().Len() != 0 {
		t.Fatalf("extracted %v: want the traceparent without the malformed tracestate", sc)
	}
	out := nats.Header{}
	tracectx.InjectHeader(ctx, out)
	if out.Get(records.HeaderTraceParent) != parent {
		t.Fatalf("InjectHeader wrote %v", out)
	}
	for _, bad := range []string{"00-xyz", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		h := nats.Header{records.HeaderTraceParent: {bad}}
		if sc := trace.SpanContextFromContext(tracectx.ExtractHeader(context.Background(), h)); sc.IsValid() {
			t.Errorf("traceparent %q gave %v, want nothing", bad, sc)
		}
	}
}
