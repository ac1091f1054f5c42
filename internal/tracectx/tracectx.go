// Package tracectx moves W3C trace context between a context.Context and
// a record's traceparent and tracestate headers, with nothing but the
// OpenTelemetry trace API. It is what the runtime's packages (actor,
// graph, core/llm) call at their publish and call points; package tracing
// is the user-facing side built on it. Every function costs a context
// lookup and allocates nothing when the context carries no span, which is
// always the case when tracing is off.
package tracectx

import (
	"context"
	"encoding/hex"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/records"
)

// Inject writes the span context of ctx into rec's TraceParent and
// TraceState when ctx carries a valid one, and reports whether it did;
// otherwise rec is left as it is (so an output keeps what it inherited).
func Inject(ctx context.Context, rec *records.Record) bool {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return false
	}
	rec.TraceParent = TraceParent(sc)
	rec.TraceState = ""
	if ts := sc.TraceState(); ts.Len() > 0 {
		if s := ts.String(); len(s) <= records.MaxTraceStateLen {
			rec.TraceState = s
		}
	}
	return true
}

// TraceParent formats sc as a version 00 traceparent.
func TraceParent(sc trace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// Remote returns the span context rec carries as a remote one, and false
// when it carries none. TraceParent is trusted to be well formed (FromMsg
// and Validate check it); a tracestate the trace API refuses is dropped.
func Remote(rec records.Record) (trace.SpanContext, bool) {
	tp := rec.TraceParent
	if len(tp) < 55 {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(tp[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true}
	if rec.TraceState != "" {
		if ts, err := trace.ParseTraceState(rec.TraceState); err == nil {
			cfg.TraceState = ts
		}
	}
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// Extract returns ctx with the span context rec carries as the remote
// parent of the next span started from it, or ctx itself when rec carries
// none.
func Extract(ctx context.Context, rec records.Record) context.Context {
	if rec.TraceParent == "" {
		return ctx
	}
	sc, ok := Remote(rec)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Tracer returns a tracer of the provider that made the recording span in
// ctx, to start a child span with; nil when ctx carries no recording span
// (tracing off, or the trace not sampled), so that callers skip building
// the span's name and attributes.
func Tracer(ctx context.Context, name string) trace.Tracer {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	return span.TracerProvider().Tracer(name)
}

// InjectHeader sets the traceparent and tracestate headers of a NATS
// request from the span of ctx, when ctx has one; h must not be nil.
func InjectHeader(ctx context.Context, h nats.Header) {
	var rec records.Record
	if Inject(ctx, &rec) {
		h.Set(records.HeaderTraceParent, rec.TraceParent)
		if rec.TraceState != "" {
			h.Set(records.HeaderTraceState, rec.TraceState)
		}
	}
}

// ExtractHeader is [Extract] for the headers of a NATS request (an API
// call rather than a record): a malformed trace context is ignored.
func ExtractHeader(ctx context.Context, h nats.Header) context.Context {
	tp := h.Get(records.HeaderTraceParent)
	if tp == "" {
		return ctx
	}
	rec := records.Record{TraceParent: tp, TraceState: h.Get(records.HeaderTraceState)}
	if rec.Validate() != nil {
		rec.TraceState = ""
		if rec.Validate() != nil {
			return ctx
		}
	}
	return Extract(ctx, rec)
}

// End ends span, first marking it failed with err when err is not nil; a
// nil span is left alone.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
