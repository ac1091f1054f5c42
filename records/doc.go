// Package records defines the AgentRecord, the unit of communication and
// of the persisted log: [Record], its mapping to a NATS message, payload
// encoding and decoding (msgpack or JSON), effector names ([Ref]) and
// record ids ([NewID]).
//
// The package depends on nothing else of the module but its msgpack
// configuration, so it is all a client in Go needs to speak the wire
// contract.
//
// # Wire mapping
//
// A record is one NATS message: its envelope is in headers, its payload,
// already encoded, is the body. [Record.Header] and [Record.Msg] write it;
// [FromMsg] reads it.
//
//	header         field        value
//	Nats-Msg-Id    ID           the record id; JetStream de-duplicates on it
//	EA-Type        Type         record type, e.g. inc, task, result (absent: "message")
//	EA-From        From         sender as <kind>/<id>; absent for outside publishers
//	EA-Process     Process      process, orchestration or session id
//	EA-Cause       Cause        id of the record that caused this one
//	EA-Owner       Owner        the user or tenant it belongs to (outputs inherit it)
//	EA-Reply       Reply        the subject a reply should go to
//	EA-Priority    Priority     "high" or absent
//	EA-Time        Time         RFC 3339 with nanoseconds, written in UTC
//	Content-Type   ContentType  application/msgpack (absent) or application/json
//	traceparent    TraceParent  W3C trace context: the trace and the span that published it
//	tracestate     TraceState   W3C vendor trace data, only with traceparent
//	(body)         Payload      the payload, encoded as Content-Type says
//
// Empty fields are not written, and absent or empty headers read as empty
// fields, except EA-Type (read as [DefaultType]) and Content-Type (always
// written; read as msgpack when absent). Header keys are looked up as
// spelled above first and then case-insensitively, so "Ea-Type" from a
// client that canonicalizes keys like net/http works too; Nats-Msg-Id is
// looked up only as spelled, because that is the only spelling JetStream
// de-duplicates on. A header with several values counts by its first.
// EA-Error carries the reason on dead letters and is not part of a Record.
//
// A plain client in any language can therefore send a record:
//
//	nats pub ea.mbox.counter.c1 '{"by":2}' -H EA-Type:inc -H Content-Type:application/json
//
// # Validation
//
// [FromMsg] and [Record.Validate] apply these rules to the envelope; a
// broken rule is a [*FieldError] that names the header, what it allows and
// what it got:
//
//   - EA-Type: 1-128 characters of A-Z a-z 0-9 _ . : / -
//   - Nats-Msg-Id, EA-Process, EA-Cause, EA-Owner: 1-256 printable ASCII characters,
//     no spaces
//   - EA-From: <kind>/<id>, each 1-128 characters of A-Z a-z 0-9 _ -
//     (see [ParseRef])
//   - EA-Reply: a NATS publish subject of at most 512 bytes: non-empty
//     tokens separated by '.', no whitespace or control characters, no
//     wildcard token * or >
//   - EA-Priority: "high", compared case-insensitively, or absent
//   - EA-Time: RFC 3339 as time.Parse reads it with time.RFC3339Nano
//     (which also tolerates a one-digit hour and a comma before the
//     fraction), with a year in UTC of 0000-9999 so that it can be
//     written back; the field holds it in UTC
//   - Content-Type: application/msgpack (alias application/x-msgpack) or
//     application/json, as mime.ParseMediaType reads it; parameters are
//     ignored and the field holds [ContentMsgpack] or [ContentJSON]
//   - traceparent: a W3C traceparent, 00-<32 hex trace id>-<16 hex span
//     id>-<2 hex flags> in lowercase, ids not all zero (a later version may
//     add fields, up to [MaxTraceParentLen]); tracestate: at most
//     [MaxTraceStateLen] printable ASCII characters. Unlike the other
//     headers, FromMsg ignores a malformed trace context instead of
//     refusing the record, as the W3C recommendation says (the record
//     starts a new trace); Validate refuses it
//
// FromMsg also checks, without decoding it, that the payload is well
// formed for its content type; an empty payload always is. JSON must be
// one value (json.Valid). Msgpack must be exactly one complete value with
// no trailing bytes, nested at most [MaxDepth] deep: a JSON body labelled
// msgpack fails, as '{' (0x7b) is a whole msgpack integer followed by
// trailing bytes. A bad payload is a [*PayloadError].
//
// Because the rules leave no whitespace or control characters in any
// header value, a record that passes Validate writes headers that survive
// the NATS protocol unchanged, and FromMsg reads back the same record.
//
// # Errors
//
// Every error for bad input matches a sentinel with errors.Is:
// [ErrInvalidName] for names ([*NameError]), [ErrMalformed] for records
// ([*FieldError] and [*PayloadError]), and [ErrPayload] for payloads
// ([*PayloadError], from FromMsg and [Record.Decode]). A malformed record
// never gets better on retry: send it to dead letters.
package records
