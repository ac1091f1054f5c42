package records

import (
	"errors"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of the envelope fields, in bytes.
const (
	MaxTypeLen  = 128 // EA-Type
	MaxIDLen    = 256 // Nats-Msg-Id, EA-Process, EA-Cause, EA-Owner
	MaxReplyLen = 512 // EA-Reply
	// MaxTraceParentLen bounds traceparent: 55 characters in version 00,
	// longer only in a future version.
	MaxTraceParentLen = 256
	// MaxTraceStateLen bounds tracestate: the 512 characters W3C says a
	// vendor must carry at least.
	MaxTraceStateLen = 512
)

// The rules, as error messages state them.
const (
	typeRule     = "must be 1-128 characters of A-Z a-z 0-9 _ . : / -"
	idRule       = "must be 1-256 printable ASCII characters without spaces"
	replyRule    = "must be a NATS subject of at most 512 bytes: non-empty tokens separated by '.', no whitespace or control characters, no wildcard token * or >"
	priorityRule = `must be "high" or absent`
	timeRule     = "must be an RFC 3339 time such as 2026-01-02T15:04:05.123456789Z"
	contentRule  = "must be application/msgpack or application/json"
	traceRule    = "must be a W3C traceparent: 00-<32 lowercase hex trace id, not all 0>-<16 lowercase hex span id, not all 0>-<2 hex flags>"
	stateRule    = "must be a W3C tracestate of at most 512 printable ASCII characters, set only with a traceparent"
)

// Validate reports whether the envelope of r keeps the wire contract, so
// that [Record.Header] writes headers that [FromMsg] accepts. It checks
// the fields that are set; empty fields are absent headers and are valid
// (an empty Type means [DefaultType]). It does not look at the payload.
// The error is a [*FieldError] that matches [ErrMalformed].
func (r Record) Validate() error {
	if r.ID != "" {
		if got := idGot(r.ID); got != "" {
			return fieldErr(HeaderID, r.ID, idRule, got)
		}
	}
	if r.Type != "" {
		if got := typeGot(r.Type); got != "" {
			return fieldErr(HeaderType, r.Type, typeRule, got)
		}
	}
	if !r.From.IsZero() {
		if err := r.From.Validate(); err != nil {
			return fromErr(r.From.Kind+"/"+r.From.ID, err)
		}
	}
	if r.Process != "" {
		if got := idGot(r.Process); got != "" {
			return fieldErr(HeaderProcess, r.Process, idRule, got)
		}
	}
	if r.Cause != "" {
		if got := idGot(r.Cause); got != "" {
			return fieldErr(HeaderCause, r.Cause, idRule, got)
		}
	}
	if r.Owner != "" {
		if got := idGot(r.Owner); got != "" {
			return fieldErr(HeaderOwner, r.Owner, idRule, got)
		}
	}
	if r.Reply != "" {
		if got := replyGot(r.Reply); got != "" {
			return fieldErr(HeaderReply, r.Reply, replyRule, got)
		}
	}
	if r.Priority != PriorityNormal && r.Priority != PriorityHigh {
		return fieldErr(HeaderPriority, string(r.Priority), priorityRule, quote(string(r.Priority)))
	}
	if !r.Time.IsZero() {
		if got := timeRangeGot(r.Time); got != "" {
			return fieldErr(HeaderTime, r.Time.String(), timeRule, got)
		}
	}
	switch r.ContentType {
	case "", ContentMsgpack, ContentJSON:
	default:
		return fieldErr(HeaderContentType, r.ContentType, contentRule, quote(r.ContentType))
	}
	if r.TraceParent != "" {
		if got := traceParentGot(r.TraceParent); got != "" {
			return fieldErr(HeaderTraceParent, r.TraceParent, traceRule, got)
		}
	}
	if r.TraceState != "" {
		got := traceStateGot(r.TraceState)
		if got == "" && r.TraceParent == "" {
			got = "no traceparent"
		}
		if got != "" {
			return fieldErr(HeaderTraceState, r.TraceState, stateRule, got)
		}
	}
	return nil
}

// traceParentGot returns "" when s is a W3C traceparent, or what was
// wrong: version 00 is exactly 55 characters; a later version (not ff) may
// add fields after a '-', as the recommendation allows.
func traceParentGot(s string) string {
	const n = 55
	if len(s) > MaxTraceParentLen {
		return strconv.Itoa(len(s)) + " characters"
	}
	if len(s) < n || (s[:2] == "00" && len(s) != n) || (len(s) > n && s[n] != '-') {
		return strconv.Itoa(len(s)) + " characters"
	}
	if s[:2] == "ff" {
		return "version ff"
	}
	zeros := [2]bool{true, true} // trace id, span id
	for i := 0; i < n; i++ {
		c := s[i]
		switch i {
		case 2, 35, 52:
			if c != '-' {
				return describeAt(s, i)
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return describeAt(s, i)
		}
		if c != '0' && 3 <= i && i < 35 {
			zeros[0] = false
		}
		if c != '0' && 36 <= i && i < 52 {
			zeros[1] = false
		}
	}
	switch {
	case zeros[0]:
		return "an all-zero trace id"
	case zeros[1]:
		return "an all-zero span id"
	}
	for i := n; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return describeAt(s, i)
		}
	}
	return ""
}

// traceStateGot returns "" when s is short printable ASCII (tracestate's
// own list syntax is left to the tracer that reads it), or what was wrong.
func traceStateGot(s string) string {
	if len(s) > MaxTraceStateLen {
		return strconv.Itoa(len(s)) + " characters"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return describeAt(s, i)
		}
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return "leading or trailing space"
	}
	return ""
}

func fieldErr(header, value, rule, got string) *FieldError {
	return &FieldError{Header: header, Value: value, Reason: rule + " (got " + got + ")"}
}

func fromErr(value string, err error) *FieldError {
	return &FieldError{Header: HeaderFrom, Value: value, Reason: "must be <kind>/<id>: " + err.Error(), Err: err}
}

// typeGot returns "" when s is a valid record type, or what was wrong.
func typeGot(s string) string {
	if s == "" {
		return "empty"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isNameChar(c) && c != '.' && c != ':' && c != '/' {
			return describeAt(s, i)
		}
	}
	if len(s) > MaxTypeLen {
		return strconv.Itoa(len(s)) + " characters"
	}
	return ""
}

// ValidateType checks a record type (the EA-Type rule: 1-128 characters of
// A-Z a-z 0-9 _ . : / -), returning a [*FieldError] naming EA-Type.
func ValidateType(typ string) error {
	if got := typeGot(typ); got != "" {
		return fieldErr(HeaderType, typ, typeRule, got)
	}
	return nil
}

// ValidateOwner checks an owner (the EA-Owner rule: 1-256 printable ASCII
// characters without spaces), returning a [*FieldError] naming EA-Owner.
func ValidateOwner(owner string) error {
	if got := idGot(owner); got != "" {
		return fieldErr(HeaderOwner, owner, idRule, got)
	}
	return nil
}

// idGot returns "" when s is a valid record id (also the rule of EA-Process
// and EA-Cause), or what was wrong.
func idGot(s string) string {
	if s == "" {
		return "empty"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return describeAt(s, i)
		}
	}
	if len(s) > MaxIDLen {
		return strconv.Itoa(len(s)) + " characters"
	}
	return ""
}

// replyGot returns "" when s is a valid NATS publish subject, or what was
// wrong. Like the NATS server, it treats only whole tokens "*" and ">" as
// wildcards: "a*b" is a literal token.
func replyGot(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxReplyLen {
		return strconv.Itoa(len(s)) + " bytes"
	}
	start := 0 // start of the current token
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			switch s[start:i] {
			case "":
				return "an empty token"
			case "*", ">":
				return "wildcard token " + s[start:i]
			}
			start = i + 1
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == 0x7f {
				return describeAt(s, i)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || unicode.IsSpace(r) || unicode.IsControl(r) {
			return describeAt(s, i)
		}
		i += size - 1
	}
	return ""
}

// timeRangeGot returns "" when t can be written as RFC 3339 in UTC (its
// year in UTC is 0000-9999), or what was wrong.
func timeRangeGot(t time.Time) string {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return "year " + strconv.Itoa(y) + " in UTC"
	}
	return ""
}

// parseTime reads an EA-Time value. The result is in UTC, so that it
// writes back unchanged.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		got := "unparsable"
		var pe *time.ParseError
		if errors.As(err, &pe) {
			if pe.Message != "" {
				got = strings.TrimPrefix(pe.Message, ": ")
			} else {
				got = quote(pe.ValueElem) + " where " + pe.LayoutElem + " belongs"
			}
		}
		return time.Time{}, fieldErr(HeaderTime, s, timeRule, got)
	}
	if got := timeRangeGot(t); got != "" {
		return time.Time{}, fieldErr(HeaderTime, s, timeRule, got)
	}
	return t.UTC(), nil
}

// parseContentType reads a Content-Type value: empty means msgpack;
// parameters are ignored; application/x-msgpack is an alias of
// application/msgpack. The result is [ContentMsgpack] or [ContentJSON].
func parseContentType(s string) (string, error) {
	switch s {
	case "", ContentMsgpack:
		return ContentMsgpack, nil
	case ContentJSON:
		return ContentJSON, nil
	}
	mt, _, err := mime.ParseMediaType(s)
	if err != nil {
		return "", fieldErr(HeaderContentType, s, contentRule, err.Error())
	}
	switch mt {
	case ContentMsgpack, "application/x-msgpack":
		return ContentMsgpack, nil
	case ContentJSON:
		return ContentJSON, nil
	}
	return "", fieldErr(HeaderContentType, s, contentRule, quote(mt))
}
