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
)

// The rules, as error messages state them.
const (
	typeRule     = "must be 1-128 characters of A-Z a-z 0-9 _ . : / -"
	idRule       = "must be 1-256 printable ASCII characters without spaces"
	replyRule    = "must be a NATS subject of at most 512 bytes: non-empty tokens separated by '.', no whitespace or control characters, no wildcard token * or >"
	priorityRule = `must be "high" or absent`
	timeRule     = "must be an RFC 3339 time such as 2026-01-02T15:04:05.123456789Z"
	contentRule  = "must be application/msgpack or application/json"
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
	return nil
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
