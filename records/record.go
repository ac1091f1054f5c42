package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/internal/codec"
)

// Header names of the envelope. See the package documentation for what
// each one holds.
const (
	HeaderID          = "Nats-Msg-Id"
	HeaderType        = "EA-Type"
	HeaderFrom        = "EA-From"
	HeaderProcess     = "EA-Process"
	HeaderCause       = "EA-Cause"
	HeaderReply       = "EA-Reply"
	HeaderPriority    = "EA-Priority"
	HeaderTime        = "EA-Time"
	HeaderContentType = "Content-Type"
	// HeaderOwner is the user (or tenant) the record belongs to.
	HeaderOwner = "EA-Owner"
	// HeaderError carries the reason on a dead letter. It is not part of
	// [Record]; [FromMsg] ignores it.
	HeaderError = "EA-Error"
	// HeaderTraceParent is the W3C trace context of the record
	// (https://www.w3.org/TR/trace-context/): the trace it belongs to and
	// the span that published it. See package tracing.
	HeaderTraceParent = "traceparent"
	// HeaderTraceState is the W3C tracestate that goes with
	// HeaderTraceParent: vendor data, carried along unchanged.
	HeaderTraceState = "tracestate"
)

// Content types of a payload.
const (
	ContentMsgpack = "application/msgpack"
	ContentJSON    = "application/json"
)

// DefaultType is the type of a record that has no EA-Type header.
const DefaultType = "message"

// Priority is the EA-Priority of a record.
type Priority string

// Priorities. On the wire PriorityNormal is an absent header.
const (
	PriorityNormal Priority = ""
	PriorityHigh   Priority = "high"
)

// Record is an AgentRecord: one NATS message whose envelope is in the
// headers and whose payload, already encoded, is the body. Empty fields
// are absent headers. Build one with [New] or [NewJSON], read one with
// [FromMsg], write one with [Record.Header] or [Record.Msg].
type Record struct {
	ID          string    // Nats-Msg-Id: unique; JetStream de-duplicates on it
	Type        string    // EA-Type; "" means DefaultType when read
	From        Ref       // EA-From "<kind>/<id>"; zero when absent (outside publishers)
	Process     string    // EA-Process: process, orchestration or session id
	Owner       string    // EA-Owner: the user or tenant the record belongs to
	Cause       string    // EA-Cause: id of the record that caused this one
	Reply       string    // EA-Reply: the NATS subject a reply should go to
	Priority    Priority  // EA-Priority
	Time        time.Time // EA-Time, RFC 3339 with nanoseconds, set by the sender
	ContentType string    // Content-Type: ContentMsgpack (when empty) or ContentJSON
	Payload     []byte    // the body, already encoded
	TraceParent string    // traceparent: W3C trace context, e.g. 00-<trace id>-<span id>-01
	TraceState  string    // tracestate: W3C vendor trace data (only with TraceParent)

	// Set only on records read from a stream; never headers. Stream and Seq
	// are the record's position: a sequence means something in its own
	// stream only (with stream groups a kind's records are in several).
	Subject string // the subject the record was published to
	Stream  string // the stream it was read from, e.g. EA_OUT or EA_OUT_1_OF_3; FromMsg leaves it empty for the caller to fill
	Seq     uint64 // its stream sequence; FromMsg leaves it 0 for the caller to fill
}

// New returns a record of type typ whose payload is v encoded as msgpack
// (with struct fields named by their json tags), with a new [NewID] id and
// the current time. A nil v gives an empty payload; an empty typ gives
// [DefaultType]. An invalid typ is a [*FieldError].
func New(typ string, v any) (Record, error) {
	return newRecord(typ, v, ContentMsgpack, codec.Marshal)
}

// NewJSON is like [New] but encodes the payload as JSON with
// encoding/json.
func NewJSON(typ string, v any) (Record, error) {
	return newRecord(typ, v, ContentJSON, json.Marshal)
}

func newRecord(typ string, v any, contentType string, marshal func(any) ([]byte, error)) (Record, error) {
	if typ == "" {
		typ = DefaultType
	} else if got := typeGot(typ); got != "" {
		return Record{}, fieldErr(HeaderType, typ, typeRule, got)
	}
	var payload []byte
	if v != nil {
		var err error
		if payload, err = marshal(v); err != nil {
			return Record{}, fmt.Errorf("records: encoding %T as %s: %w", v, contentType, err)
		}
	}
	now := time.Now()
	return Record{
		ID:          newID(now),
		Type:        typ,
		Time:        now.UTC(),
		ContentType: contentType,
		Payload:     payload,
	}, nil
}

// Decode decodes the payload into v, which must be a non-nil pointer, as
// its ContentType says: msgpack with struct fields named by their json
// tags (maps decode as map[string]any), or JSON with encoding/json. An
// empty payload leaves v untouched and returns nil. A payload that is not
// well formed, or does not fit v, is a [*PayloadError] (matching
// [ErrPayload] and [ErrMalformed]).
func (r Record) Decode(v any) error {
	if len(r.Payload) == 0 {
		return nil
	}
	ct, err := parseContentType(r.ContentType)
	if err != nil {
		return &PayloadError{ContentType: r.ContentType, Err: errors.New("unsupported content type")}
	}
	if ct == ContentJSON {
		err = json.Unmarshal(r.Payload, v)
	} else if err = checkMsgpack(r.Payload); err == nil {
		// Checked first: codec.Unmarshal ignores trailing bytes and
		// recurses without a depth limit.
		err = codec.Unmarshal(r.Payload, v)
	}
	if err != nil {
		return &PayloadError{ContentType: ct, Err: err}
	}
	return nil
}

// Header returns the envelope of r as NATS headers: one header for each
// non-empty field, Content-Type always (application/msgpack when
// ContentType is empty), EA-Time in UTC formatted with time.RFC3339Nano.
// Header does not validate r; call [Record.Validate] first for records
// built from untrusted input.
func (r Record) Header() nats.Header {
	var pairs [12]struct{ k, v string } // every header Header may write
	n := 0
	set := func(k, v string) {
		if v != "" {
			pairs[n].k, pairs[n].v = k, v
			n++
		}
	}
	set(HeaderID, r.ID)
	set(HeaderType, r.Type)
	set(HeaderFrom, r.From.String())
	set(HeaderProcess, r.Process)
	set(HeaderOwner, r.Owner)
	set(HeaderCause, r.Cause)
	set(HeaderReply, r.Reply)
	set(HeaderPriority, string(r.Priority))
	set(HeaderTraceParent, r.TraceParent)
	if r.TraceParent != "" {
		set(HeaderTraceState, r.TraceState)
	}
	if !r.Time.IsZero() {
		set(HeaderTime, r.Time.UTC().Format(time.RFC3339Nano))
	}
	ct := r.ContentType
	if ct == "" {
		ct = ContentMsgpack
	}
	set(HeaderContentType, ct)
	// Sized to the headers written (a map of up to eight entries is one
	// group, a larger hint a table several times its size), with one
	// backing array for every header's value, not one per header.
	h := make(nats.Header, n)
	vals := make([]string, n)
	for i, p := range pairs[:n] {
		vals[i] = p.v
		h[p.k] = vals[i : i+1 : i+1]
	}
	return h
}

// Msg returns r as a NATS message to publish on subject. Its Data is
// r.Payload, not a copy.
func (r Record) Msg(subject string) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: r.Header(), Data: r.Payload}
}

// envelope holds the header keys FromMsg reads, in the order of the
// slots of headerValues.
var envelope = [...]string{
	HeaderID, HeaderType, HeaderFrom, HeaderProcess, HeaderCause,
	HeaderReply, HeaderPriority, HeaderTime, HeaderContentType, HeaderOwner,
	HeaderTraceParent, HeaderTraceState,
}

const (
	slotID = iota
	slotType
	slotFrom
	slotProcess
	slotCause
	slotReply
	slotPriority
	slotTime
	slotContentType
	slotOwner
	slotTraceParent
	slotTraceState
	numSlots
)

// FromMsg reads the record carried by a NATS message published on subject
// with headers h and body data. Payload aliases data.
//
// It checks every envelope header and that the payload is well formed for
// its content type (see the package documentation), without decoding it.
// Absent or empty headers give empty fields, except EA-Type
// ([DefaultType]) and Content-Type ([ContentMsgpack]). Every error is a
// [*FieldError] or a [*PayloadError], both matching [ErrMalformed]. FromMsg
// never panics, whatever its input.
func FromMsg(subject string, h nats.Header, data []byte) (Record, error) {
	v := headerValues(h)
	r := Record{Subject: subject, Payload: data}

	if s := v[slotID]; s != "" {
		if got := idGot(s); got != "" {
			return Record{}, fieldErr(HeaderID, s, idRule, got)
		}
		r.ID = s
	}
	r.Type = DefaultType
	if s := v[slotType]; s != "" {
		if got := typeGot(s); got != "" {
			return Record{}, fieldErr(HeaderType, s, typeRule, got)
		}
		r.Type = s
	}
	if s := v[slotFrom]; s != "" {
		from, err := ParseRef(s)
		if err != nil {
			return Record{}, fromErr(s, err)
		}
		r.From = from
	}
	if s := v[slotProcess]; s != "" {
		if got := idGot(s); got != "" {
			return Record{}, fieldErr(HeaderProcess, s, idRule, got)
		}
		r.Process = s
	}
	if s := v[slotCause]; s != "" {
		if got := idGot(s); got != "" {
			return Record{}, fieldErr(HeaderCause, s, idRule, got)
		}
		r.Cause = s
	}
	if s := v[slotOwner]; s != "" {
		if got := idGot(s); got != "" {
			return Record{}, fieldErr(HeaderOwner, s, idRule, got)
		}
		r.Owner = s
	}
	if s := v[slotReply]; s != "" {
		if got := replyGot(s); got != "" {
			return Record{}, fieldErr(HeaderReply, s, replyRule, got)
		}
		r.Reply = s
	}
	if s := v[slotPriority]; s != "" {
		if !strings.EqualFold(s, string(PriorityHigh)) {
			return Record{}, fieldErr(HeaderPriority, s, priorityRule, quote(s))
		}
		r.Priority = PriorityHigh
	}
	if s := v[slotTime]; s != "" {
		t, err := parseTime(s)
		if err != nil {
			return Record{}, err
		}
		r.Time = t
	}
	// A malformed trace context is ignored, as the W3C recommendation says
	// (the record starts a new trace instead): it never costs a record.
	if s := v[slotTraceParent]; s != "" && traceParentGot(s) == "" {
		r.TraceParent = s
		if s := v[slotTraceState]; s != "" && traceStateGot(s) == "" {
			r.TraceState = s
		}
	}
	ct, err := parseContentType(v[slotContentType])
	if err != nil {
		return Record{}, err
	}
	r.ContentType = ct
	if err := checkPayload(ct, data); err != nil {
		return Record{}, err
	}
	return r, nil
}

// headerValues returns the first value of each envelope header in h.
//
// nats.Header is a plain case-sensitive map, and NATS keeps header keys as
// the publisher wrote them: "EA-Type" from the nats CLI, "Ea-Type" from a
// client that canonicalizes keys like net/http. So a key is looked up as
// written in the contract first, then case-insensitively; when several
// spellings of a key are present, the exact one wins, otherwise the one
// that sorts first. Nats-Msg-Id is only looked up exactly: that is the
// only spelling JetStream de-duplicates on.
//
// Unlike nats.Header.Get, it does not panic on a key with an empty value
// list.
func headerValues(h nats.Header) (v [numSlots]string) {
	var exact [numSlots]bool
	found := 0
	for i, k := range envelope {
		if vs, ok := h[k]; ok {
			exact[i] = true
			found++
			if len(vs) > 0 {
				v[i] = vs[0]
			}
		}
	}
	if found == len(h) {
		return v // common case: nothing else to look at
	}
	var chosen [numSlots]string
	for k, vs := range h {
		for i := slotID + 1; i < numSlots; i++ {
			if exact[i] || len(k) != len(envelope[i]) || !strings.EqualFold(k, envelope[i]) {
				continue
			}
			if chosen[i] == "" || k < chosen[i] {
				chosen[i] = k
				v[i] = ""
				if len(vs) > 0 {
					v[i] = vs[0]
				}
			}
		}
	}
	return v
}
