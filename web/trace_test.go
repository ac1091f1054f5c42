package web_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/tracing"
	"github.com/effectors/effectors/web"
)

const givenParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// storedAt returns the record the mailbox stream holds at the seq of ack.
func storedAt(t *testing.T, e *env, ack map[string]any) records.Record {
	t.Helper()
	ctx := context.Background()
	stream, err := e.conn.JetStream().Stream(ctx, e.conn.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, num(ack["seq"]))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.FromMsg(msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func tracedSend(req string, ref records.Ref, id, traceparent string) map[string]any {
	f := sendFrame(req, ref, id, 1)
	if traceparent != "" {
		f["record"].(map[string]any)["traceparent"] = traceparent
	}
	return f
}

// TestSendTraced: with a Tracer, a send whose frame gives a traceparent is a
// producer span child of it, in its trace, and the stored record carries
// that span; a send without one starts a trace; a malformed traceparent is
// refused with bad_request naming it.
func TestSendTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	e := newEnv(t, envOpts{cfg: web.Config{Tracer: tracing.New(tp)}})
	ref := e.create(t, "traced")
	c := e.dial(t, nil)
	c.next("welcome", isType("welcome"))

	c.write(tracedSend("given", ref, "tr-1", givenParent))
	got := storedAt(t, e, c.reply("given"))
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 1 {
		t.Fatalf("%d spans after one send, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "gateway send" || s.SpanContext().TraceID().String() != givenParent[3:35] || s.Parent().SpanID().String() != givenParent[36:52] {
		t.Errorf("span %q trace %s parent %s, want gateway send in the given trace, child of the given span", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; got.TraceParent != want {
		t.Errorf("stored traceparent %q, want the send's span %q", got.TraceParent, want)
	}

	c.write(tracedSend("new", ref, "tr-2", ""))
	got = storedAt(t, e, c.reply("new"))
	spans = exp.GetSpans().Snapshots()
	if len(spans) != 2 || spans[1].Parent().IsValid() {
		t.Fatalf("a send without traceparent: spans %d, parent valid %v; want a second span starting a trace", len(spans), len(spans) == 2 && spans[1].Parent().IsValid())
	}
	if got.TraceParent == "" || got.TraceParent[3:35] != spans[1].SpanContext().TraceID().String() {
		t.Errorf("stored traceparent %q, want the new trace %s", got.TraceParent, spans[1].SpanContext().TraceID())
	}

	c.write(tracedSend("bad", ref, "tr-3", "00-xyz"))
	if f := c.reply("bad"); f["type"] != "error" || f["code"] != web.CodeBadRequest {
		t.Fatalf("malformed traceparent: %v, want error %s", f, web.CodeBadRequest)
	}
}

// TestSendUntraced: without a Tracer a frame's traceparent is stored
// unchanged and a send without one stores none; nothing is traced.
func TestSendUntraced(t *testing.T) {
	e := newEnv(t, envOpts{})
	ref := e.create(t, "plain")
	c := e.dial(t, nil)
	c.next("welcome", isType("welcome"))
	c.write(tracedSend("given", ref, "pl-1", givenParent))
	if got := storedAt(t, e, c.reply("given")); got.TraceParent != givenParent {
		t.Errorf("stored traceparent %q, want the given %q unchanged", got.TraceParent, givenParent)
	}
	c.write(tracedSend("none", ref, "pl-2", ""))
	if got := storedAt(t, e, c.reply("none")); got.TraceParent != "" {
		t.Errorf("stored traceparent %q, want none", got.TraceParent)
	}
}
