// Package tracing carries W3C trace context (https://www.w3.org/TR/trace-context/)
// through records and exports OpenTelemetry spans over OTLP, so that one
// request is one trace from its first publish through every effector hop,
// supervisor step, graph node, LLM call and gateway send.
//
// # On the wire
//
// A record's trace context is in two headers, records.HeaderTraceParent
// (traceparent) and records.HeaderTraceState (tracestate), fields
// TraceParent and TraceState of records.Record. The runtime carries them
// whether tracing is on or off: a record sent from logic inherits the
// traceparent of the record in hand, or, with tracing on, gets the hop's
// own span as its parent. A record a user publishes with a traceparent
// continues the user's trace; one without starts a trace at its first
// traced hop (with tracing on; off, it stays without).
//
// # Turning it on
//
// Tracing is off by default and then costs nothing but carrying the
// headers: every component holds a *Tracer, nil when off, and checks it
// against nil. [Setup] turns it on from a [Config] (the binaries'
// --otlp-endpoint, or the standard OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_* variables) and returns the Tracer and a shutdown func that
// flushes the spans still buffered:
//
//	t, shutdown, err := tracing.Setup(ctx, tracing.Config{Endpoint: "http://localhost:4318", ServiceName: "my-node"})
//	if err != nil { ... }
//	defer shutdown(context.Background())
//	n, err := actor.NewNode(conn, actor.Options{Intercept: t.Intercept()})
//
// [New] makes a Tracer of any OpenTelemetry TracerProvider instead (the
// SDK's with an in-memory exporter in tests).
//
// # Where spans come from
//
//   - every attempt of an effector's logic: a consumer span "process
//     <kind>", child of the span in the record's traceparent, from
//     [Tracer.Intercept] on a node (actor.Options.Intercept) or
//     [Middleware] on one kind (actor.Kind.With);
//   - every change of an orchestration: "orchestration start", "result",
//     "input", "cancel" (supervisor.Options.Tracer); its task records carry
//     the step's span, and the orchestration API honours a traceparent
//     header on a request (supervisor.Client sends the caller's);
//   - every node of a graph run inside a traced hop or step: "graph node
//     <name>";
//   - every call of core/llm's provider inside one: a client span "chat
//     <model>" or "embeddings <model>";
//   - every send through the gateway: a producer span "gateway send"
//     (web.Config.Tracer), child of the traceparent the client's frame
//     gives.
//
// Graph nodes and LLM calls need no Tracer of their own: they start their
// span from the provider of the recording span in their context, and start
// none when there is none.
//
// For a program publishing records on its own, [Tracer.Start] starts a span
// whose parent is a record's context and [Inject] writes a context's span
// into a record; actor.Client.Send injects the span of its context by
// itself.
//
// # Tests
//
// Package tracing/tracingtest is a real OTLP/HTTP receiver, shaped like
// httptest, that decodes the protobuf the exporter posts.
package tracing
