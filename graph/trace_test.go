package graph_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/effectors/effectors/graph"
)

// TestNodesAreSpans: run inside a traced hop (a recording span in ctx),
// each node is a span, child of it, failed when the node fails; the
// spans a node starts (an LLM call) are its children. Without a span in
// ctx nothing is traced.
func TestNodesAreSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	b := graph.New[essay]()
	draft := graph.Plain(b, "draft", func(s *essay) *string { return &s.Draft })
	b.AddNode("write", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		_, call := tp.Tracer("test").Start(ctx, "call")
		call.End()
		if s.Topic == "fail" {
			return graph.Update[essay]{}, graph.Permanent(errors.New("no"))
		}
		return graph.Updates(draft.Set("d")), nil
	})
	b.AddEdge(graph.START, "write").AddEdge("write", graph.END)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), "", graph.Replace(essay{Topic: "otters"})); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 1 { // the node's own "call" only
		t.Fatalf("%d spans without a span in ctx, want 1 (the node's call)", n)
	}
	exp.Reset()

	ctx, hop := tp.Tracer("test").Start(context.Background(), "hop")
	if _, err := g.Invoke(ctx, "", graph.Replace(essay{Topic: "otters"})); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(ctx, "", graph.Replace(essay{Topic: "fail"})); err == nil {
		t.Fatal("a failing node gave no error")
	}
	hop.End()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	nodes, calls := byName["graph node write"], byName["call"]
	if len(nodes) != 2 || len(calls) != 2 {
		t.Fatalf("spans %v, want two node spans and two calls", byName)
	}
	for i, n := range nodes {
		if n.Parent().SpanID() != hop.SpanContext().SpanID() {
			t.Errorf("node span %d: parent %s, want the hop", i, n.Parent().SpanID())
		}
		if calls[i].Parent().SpanID() != n.SpanContext().SpanID() {
			t.Errorf("call %d: parent %s, want its node's span", i, calls[i].Parent().SpanID())
		}
		if failed := n.Status().Code == codes.Error; failed != (i == 1) {
			t.Errorf("node span %d failed %v", i, failed)
		}
	}
}
