package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/actor"
)

// Middleware traces a kind's logic: each attempt of a record is a
// consumer span named "process <kind>", child of the span that published
// the record, and the records the logic sends carry it as their parent.
// On a nil t it returns nil, which [actor.Kind.With] skips, so a kind
// built with tracing off runs exactly as without it.
//
//	kind = kind.With(tracing.Middleware[State](tracer))
func Middleware[S any](t *Tracer) actor.Middleware[S] {
	if t == nil {
		return nil
	}
	return func(next actor.Logic[S]) actor.Logic[S] {
		return func(c *actor.Context, s S) (out S, err error) {
			ctx, span := t.startHop(c)
			defer func() { End(span, err) }()
			return next(c.WithContext(ctx), s)
		}
	}
}

// Intercept is [Middleware] for every kind a node hosts, as an
// [actor.Options] Intercept; nil on a nil t.
func (t *Tracer) Intercept() actor.Interceptor {
	if t == nil {
		return nil
	}
	return func(c *actor.Context, next func(*actor.Context) error) (err error) {
		ctx, span := t.startHop(c)
		defer func() { End(span, err) }()
		return next(c.WithContext(ctx))
	}
}

// startHop starts the span of one attempt of logic on the record in hand.
func (t *Tracer) startHop(c *actor.Context) (context.Context, trace.Span) {
	rec, self := c.Record(), c.Self()
	attrs := append(RecordAttributes(rec), attribute.String("messaging.operation.type", "process"), attribute.String("ea.effector", self.String()))
	return t.Start(c, "process "+self.Kind, trace.SpanKindConsumer, rec, attrs...)
}
