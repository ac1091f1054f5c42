package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/records"
)

// Instrumentation is the name of the tracer the runtime's spans come
// from (the OpenTelemetry instrumentation scope).
const Instrumentation = "github.com/effectors/effectors"

// Tracer starts the runtime's spans. A nil *Tracer is tracing off: every
// method is safe on it and does nothing, so a component holds a *Tracer
// and checks it against nil on its hot path. Make one with [Setup] (OTLP
// from flags and the environment) or [New] (any TracerProvider, e.g. the
// SDK's with an in-memory exporter in tests).
type Tracer struct {
	tracer trace.Tracer
}

// New returns a Tracer starting spans from tp, or nil (tracing off) when
// tp is nil.
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tracer: tp.Tracer(Instrumentation)}
}

// Enabled reports whether t traces (t is not nil).
func (t *Tracer) Enabled() bool { return t != nil }

// Start starts a span named name of kind. Its parent is the span rec
// carries in its traceparent header (a record continues the trace of
// whoever published it); when rec carries none, the span in ctx; when ctx
// has none either, the span starts a new trace. The returned context
// carries the span: records built from it with [Inject] (or sent from
// logic given it) carry it as their parent. On a nil t it returns ctx and
// the span already in ctx (usually a no-op one), starting nothing.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind, rec records.Record, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx = tracectx.Extract(ctx, rec)
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Inject writes the span context of ctx into rec's traceparent and
// tracestate and reports whether there was one; without one rec is left
// as it is. Records sent from logic are injected by the runtime itself;
// call Inject for records a program publishes on its own.
func Inject(ctx context.Context, rec *records.Record) bool {
	return tracectx.Inject(ctx, rec)
}

// Extract returns ctx with the span context rec carries as the remote
// parent of the next span started from ctx, or ctx unchanged when rec
// carries none.
func Extract(ctx context.Context, rec records.Record) context.Context {
	return tracectx.Extract(ctx, rec)
}

// End ends span, first marking it failed with err when err is not nil.
// It does nothing to a nil span.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// RecordAttributes are the attributes of a span about rec: its id, type
// and process, and the subject it was published to.
func RecordAttributes(rec records.Record) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, attribute.String("messaging.system", "nats"), attribute.String("messaging.message.id", rec.ID), attribute.String("ea.record.type", rec.Type))
	if rec.Subject != "" {
		attrs = append(attrs, attribute.String("messaging.destination.name", rec.Subject))
	}
	if rec.Process != "" {
		attrs = append(attrs, attribute.String("ea.process", rec.Process))
	}
	return attrs
}
