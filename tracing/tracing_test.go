package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/tracing"
	"github.com/effectors/effectors/tracing/tracingtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 60 * time.Second

// relay forwards a "hop" record to relay/<n+1> until n reaches last, and
// emits "done" on its outbox at the last one.
func relay(last int) actor.Kind[int] {
	return actor.Kind[int]{Name: "relay", Logic: func(c *actor.Context, n int) (int, error) {
		var at int
		if _, err := fmt.Sscan(c.Self().ID[1:], &at); err != nil {
			return n, actor.Permanent(err)
		}
		if at == last {
			return n + 1, c.Emit("done", nil)
		}
		return n + 1, c.Send(records.Ref{Kind: "relay", ID: fmt.Sprintf("r%d", at+1)}, "hop", nil)
	}}
}

// lastOutput sends rec to relay/r1 and returns the "done" record relay/r<last> emits.
func lastOutput(t *testing.T, client *actor.Client, ctx context.Context, last int, rec records.Record) records.Record {
	t.Helper()
	for i := 1; i <= last; i++ {
		actortest.Create(t, client, records.Ref{Kind: "relay", ID: fmt.Sprintf("r%d", i)}, nil)
	}
	sctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	outs, err := client.Subscribe(sctx, records.Ref{Kind: "relay", ID: fmt.Sprintf("r%d", last)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Send(ctx, records.Ref{Kind: "relay", ID: "r1"}, rec); err != nil {
		t.Fatal(err)
	}
	for out, err := range outs {
		if err != nil {
			t.Fatal(err)
		}
		if out.Type == "done" {
			return out
		}
	}
	t.Fatalf("no done record within %s", wait)
	return records.Record{}
}

// TestHopsAreOneTraceOfParentAndChildren: a record published inside a
// user's span goes through three traced hops; each hop's span is a child of
// the span that published its input (the user's, then the previous hop's),
// all in the user's trace, and the last output carries the last hop's span.
func TestHopsAreOneTraceOfParentAndChildren(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracer := tracing.New(tp)

	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	actortest.StartNode(t, conn, actor.Options{Intercept: tracer.Intercept()}, relay(3))
	client, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}

	userCtx, user := tp.Tracer("user").Start(context.Background(), "user publishes")
	rec, err := records.New("hop", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := lastOutput(t, client, userCtx, 3, rec)
	user.End()

	var hops []sdktrace.ReadOnlySpan
	actortest.Eventually(t, wait, "three hop spans", func() bool {
		hops = hops[:0]
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "process relay" {
				hops = append(hops, s)
			}
		}
		return len(hops) == 3
	})
	byEffector := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range hops {
		for _, a := range s.Attributes() {
			if a.Key == "ea.effector" {
				byEffector[a.Value.AsString()] = s
			}
		}
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("hop span kind %v, want consumer", s.SpanKind())
		}
	}
	want := user.SpanContext()
	for i := 1; i <= 3; i++ {
		s, ok := byEffector[fmt.Sprintf("relay/r%d", i)]
		if !ok {
			t.Fatalf("no span of relay/r%d among %v", i, byEffector)
		}
		if s.SpanContext().TraceID() != want.TraceID() {
			t.Errorf("relay/r%d: trace %s, want the user's %s", i, s.SpanContext().TraceID(), want.TraceID())
		}
		if s.Parent().SpanID() != want.SpanID() {
			t.Errorf("relay/r%d: parent %s, want %s (the span that published its input)", i, s.Parent().SpanID(), want.SpanID())
		}
		want = s.SpanContext()
	}
	if got := tracectx.TraceParent(want); out.TraceParent != got {
		t.Errorf("the last output carries traceparent %q, want the last hop's %q", out.TraceParent, got)
	}
}

// TestOffOutputsCarryInputContextUnchanged: with tracing off (Setup with no
// endpoint) outputs carry the input's traceparent and tracestate unchanged,
// or none when the input had none, and the OTLP receiver gets nothing.
func TestOffOutputsCarryInputContextUnchanged(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	tracer, shutdown, err := tracing.Setup(context.Background(), tracing.Config{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	if tracer != nil {
		t.Fatal("Setup with no endpoint returned a tracer: tracing must be off by default")
	}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	actortest.StartNode(t, conn, actor.Options{Intercept: tracer.Intercept()}, relay(2).With(tracing.Middleware[int](tracer)))
	client, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New("hop", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rec.TraceState = "rojo=00f067aa0ba902b7"
	out := lastOutput(t, client, context.Background(), 2, rec)
	if out.TraceParent != rec.TraceParent || out.TraceState != rec.TraceState {
		t.Errorf("output carries %q %q, want the input's %q %q unchanged", out.TraceParent, out.TraceState, rec.TraceParent, rec.TraceState)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := recv.Spans(); len(spans) != 0 {
		t.Errorf("tracing off exported %d spans: %v", len(spans), spans)
	}
}

// TestOffNoContextStaysWithout: with tracing off a record without trace
// context gives outputs without one (no trace is started).
func TestOffNoContextStaysWithout(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	actortest.StartNode(t, conn, actor.Options{}, relay(2))
	client, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New("hop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out := lastOutput(t, client, context.Background(), 2, rec); out.TraceParent != "" || out.TraceState != "" {
		t.Errorf("output carries %q %q, want no trace context", out.TraceParent, out.TraceState)
	}
}

// TestMiddlewareStartsTraceAndMarksFailure: the typed middleware, on a kind
// applied outside a node: a record without trace context starts a new
// trace whose root is the hop, its output carries the hop's span, and a
// failing attempt is a span with an error status.
func TestMiddlewareStartsTraceAndMarksFailure(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	k := actor.Kind[int]{Name: "k", Logic: func(c *actor.Context, n int) (int, error) {
		if c.Record().Type == "fail" {
			return n, fmt.Errorf("refused")
		}
		return n + 1, c.Emit("out", nil)
	}}.With(tracing.Middleware[int](tracing.New(tp)))
	_, outs, err := k.Apply(context.Background(), records.Ref{Kind: "k", ID: "a"}, records.Record{ID: "in1", Type: "go"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	if spans[0].Parent().IsValid() {
		t.Errorf("hop of a record without trace context has parent %s, want a new trace", spans[0].Parent().SpanID())
	}
	if len(outs) != 1 || outs[0].Record.TraceParent != tracectx.TraceParent(spans[0].SpanContext()) {
		t.Errorf("outputs %v, want one carrying the hop's span %s", outs, tracectx.TraceParent(spans[0].SpanContext()))
	}
	if _, _, err := k.Apply(context.Background(), records.Ref{Kind: "k", ID: "a"}, records.Record{ID: "in2", Type: "fail"}, 0); err == nil {
		t.Fatal("failing logic returned no error")
	}
	spans = exp.GetSpans().Snapshots()
	if len(spans) != 2 || spans[1].Status().Description != "refused" {
		t.Fatalf("failing attempt's span: %v", spans)
	}
	if tracing.Middleware[int](nil) != nil || (*tracing.Tracer)(nil).Intercept() != nil {
		t.Error("a nil Tracer gave middleware: tracing off must add nothing")
	}
}

// TestSetupExportsToOTLPReceiver: Setup with an endpoint exports over
// OTLP/HTTP protobuf to a real receiver, with the service name given.
func TestSetupExportsToOTLPReceiver(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	tracer, shutdown, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: recv.URL, ServiceName: "unit"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracer.Start(context.Background(), "one", trace.SpanKindProducer, records.Record{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 1 {
		t.Fatalf("received %v, want one span", spans)
	}
	s := spans[0]
	if s.Name != "one" || s.Service != "unit" || s.Kind != "producer" || s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.ParentID != "00f067aa0ba902b7" {
		t.Errorf("received %v", s)
	}
}

// env is a Getenv reading m.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestSetupRefusesBadSettings: a malformed endpoint or an unsupported
// protocol is an error naming it.
func TestSetupRefusesBadSettings(t *testing.T) {
	for _, c := range []tracing.Config{
		{Endpoint: "localhost:4318"},
		{Endpoint: "ftp://x"},
		{Endpoint: "http://x", Getenv: func(k string) string {
			if k == "OTEL_EXPORTER_OTLP_PROTOCOL" {
				return "grpc"
			}
			return ""
		}},
		{Endpoint: "http://x", Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "no-equals-sign"})},
		{Endpoint: "http://x", Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "k=%zz"})},
		{Endpoint: "http://x", Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"})},
		{Endpoint: "http://x", Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"})},
		{Endpoint: "http://x", Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": "/no/such/ca.pem"})},
		{Endpoint: "http://x", Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x.pem"})},
	} {
		if err := c.Validate(); !errors.Is(err, tracing.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", c, err)
		}
		if _, _, err := tracing.Setup(context.Background(), c); err == nil {
			t.Errorf("Setup(%+v) accepted", c)
		}
	}
	if (tracing.Config{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})}).On() {
		t.Error("OTEL_SDK_DISABLED=true did not turn tracing off")
	}
}

// TestExportSettings: the OTEL_EXPORTER_OTLP_* settings reach the receiver:
// headers (the traces-specific variable winning, values percent-decoded)
// and gzip compression.
func TestExportSettings(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":        "x-api-key=general",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-api-key=a%20secret, x-tenant=t1",
		"OTEL_EXPORTER_OTLP_COMPRESSION":    "gzip",
		"OTEL_EXPORTER_OTLP_TIMEOUT":        "5000",
	}
	tracer, shutdown, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: recv.URL, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracer.Start(context.Background(), "one", trace.SpanKindProducer, records.Record{})
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := recv.Headers()
	if len(hs) != 1 || len(recv.Spans()) != 1 {
		t.Fatalf("received %d requests and %v, want one request with one span", len(hs), recv.Spans())
	}
	h := hs[0]
	if h.Get("X-Api-Key") != "a secret" || h.Get("X-Tenant") != "t1" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("request headers %v: want x-api-key %q, x-tenant t1, gzip", h, "a secret")
	}
}

// TestExportRetriesUnavailable: a receiver answering 503 (with Retry-After)
// and then 429 gets the same spans again until it takes them; one answering
// 400 is not asked again (the SDK reports the error to OpenTelemetry's
// error handler, not to shutdown).
func TestExportRetriesUnavailable(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	target, err := url.Parse(recv.URL)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	answers := []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}
	var asked int
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		var code int
		if len(answers) > 0 {
			code, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		if code != 0 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", code)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	defer front.Close()

	tracer, shutdown, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracer.Start(context.Background(), "retried", trace.SpanKindProducer, records.Record{})
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := recv.Spans(); len(spans) != 1 || spans[0].Name != "retried" || asked != 3 {
		t.Fatalf("after 503, 429: asked %d times, received %v; want 3 requests and the span once", asked, spans)
	}

	mu.Lock()
	answers, asked = []int{http.StatusBadRequest}, 0
	mu.Unlock()
	tracer, shutdown, err = tracing.Setup(context.Background(), tracing.Config{Endpoint: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, span = tracer.Start(context.Background(), "refused", trace.SpanKindProducer, records.Record{})
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if asked != 1 || len(recv.Spans()) != 1 {
		t.Fatalf("after 400: asked %d times, received %v; want one request and nothing more received", asked, recv.Spans())
	}
}
