package llm_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
)

// TestCallsAreClientSpans: inside a traced hop (a recording span in ctx)
// each provider call is a client span, child of it, failed when the call
// fails; without a span in ctx nothing is traced.
func TestCallsAreClientSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)

	// Untraced: no span.
	srv.Enqueue(llmtest.Reply{Text: "plain"})
	if _, err := p.Generate(t.Context(), core.Prompt("", "hi")); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans without a span in ctx, want 0", n)
	}

	ctx, hop := tp.Tracer("test").Start(t.Context(), "process writer")
	srv.Enqueue(llmtest.Reply{Text: "hello"}, llmtest.Reply{Chunks: []string{"a", "b"}}, llmtest.Reply{Status: 400})
	if _, err := p.Generate(ctx, core.Prompt("", "hi")); err != nil {
		t.Fatal(err)
	}
	for _, err := range p.Stream(ctx, core.Prompt("", "hi")) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Generate(ctx, core.Prompt("", "hi")); err == nil {
		t.Fatal("a 400 answer gave no error")
	}
	hop.End()
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 3 calls and the hop", len(spans))
	}
	for i, s := range spans[:3] {
		if s.Name() != "chat fake-model" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != hop.SpanContext().SpanID() {
			t.Errorf("call %d: span %q kind %v parent %s, want a client span chat fake-model, child of the hop", i, s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
		if failed := s.Status().Code == codes.Error; failed != (i == 2) {
			t.Errorf("call %d: span failed %v", i, failed)
		}
	}
}
