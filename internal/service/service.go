// Package service is what the runtime's request/reply services share: the
// control endpoints (<prefix>.ctl.*, package actor), the orchestration
// API (<prefix>.orch.*, package supervisor) and the record store
// (<prefix>.store.*, package store). It decodes request bodies
// strictly, answers errors in the NATS micro error headers with a code and a
// reason, and turns those replies back into typed errors on the client side,
// both through one [Table] per service, so that no side ever matches an
// error by its text.
//
// # The wire
//
// A request body is one JSON object: no unknown field, nothing after it, at
// most the service's size cap. An error reply has an empty body and three
// headers: Nats-Service-Error (the text, one line, at most [MaxErrorText]
// bytes), Nats-Service-Error-Code (an HTTP-like code) and [HeaderReason]
// (a short snake_case reason naming the typed error, e.g. "not_found" or
// "unknown_name", where one code stands for several).
package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Headers of an error reply.
const (
	// HeaderError is the error text (the NATS micro header).
	HeaderError = micro.ErrorHeader
	// HeaderCode is the HTTP-like code (the NATS micro header).
	HeaderCode = micro.ErrorCodeHeader
	// HeaderReason is the reason: which typed error the code stands for.
	HeaderReason = "EA-Error-Reason"
)

// Codes and reasons every table has.
const (
	CodeBadRequest = 400
	CodeInternal   = 500
	// ReasonBadRequest is the reason of a request that does not decode.
	ReasonBadRequest = "invalid"
	// ReasonInternal is the reason of an error no entry of a table names.
	ReasonInternal = "internal"
)

// Limits of what a reply echoes.
const (
	// MaxErrorText bounds the error text of a reply, in bytes, so that an
	// error reply always fits in a NATS message whatever it quotes.
	MaxErrorText = 1024
	// MaxEcho bounds what an error text quotes of a request value.
	MaxEcho = 64
)

// ErrBadRequest is matched by the errors of [Decode]: the request body is
// not what the endpoint takes.
var ErrBadRequest = errors.New("bad request body")

// Entry maps one typed error to its code and reason.
type Entry struct {
	// Err is the sentinel (or an error matching it with errors.Is).
	Err    error
	Code   int
	Reason string
	// Also lists broader sentinels every error of this entry wraps too (a
	// service whose precise errors all wrap its ErrInvalid): a reply with
	// this entry's code and reason matches them as well.
	Also []error
}

// stands reports whether the entry's errors match target.
func (e Entry) stands(target error) bool {
	return e.Err == target || slices.Contains(e.Also, target)
}

// Table maps the typed errors of a service to codes and reasons, in both
// directions: servers encode an error with the first entry it matches
// (errors.Is), clients decode a reply's reason (or, for a reply without one,
// its code) to the entries it stands for. Put the more specific sentinel of
// a code first. An error no entry matches is a 500 "internal".
type Table []Entry

// Replier is an error that carries its own reply: an [*Error] relayed from
// another server, or a service's typed error made with a table entry's code
// and reason.
type Replier interface {
	error
	Reply() (code int, reason, message string)
}

// Encode returns the code and reason of err: a [Replier]'s own, else those
// of the first entry err matches.
func (t Table) Encode(err error) (code int, reason string) {
	var r Replier
	if errors.As(err, &r) {
		code, reason, _ = r.Reply()
		return code, reason
	}
	for _, e := range t {
		if errors.Is(err, e.Err) {
			return e.Code, e.Reason
		}
	}
	if errors.Is(err, ErrBadRequest) {
		return CodeBadRequest, ReasonBadRequest
	}
	return CodeInternal, ReasonInternal
}

// Is reports whether an error reply with code and reason stands for target:
// an entry with that reason (when reason is set) or, for a reply without
// one, the first entry with that code, has target as its Err or in Also.
func (t Table) Is(code int, reason string, target error) bool {
	if reason == "" {
		for _, e := range t {
			if e.Code == code {
				return e.stands(target)
			}
		}
		return false
	}
	for _, e := range t {
		if e.Reason == reason && e.Code == code && e.stands(target) {
			return true
		}
	}
	return reason == ReasonBadRequest && code == CodeBadRequest && target == ErrBadRequest
}

// Error is an error reply as a client reads it.
type Error struct {
	Code    int
	Reason  string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Reply returns the code, reason and message: relayed, the reply is the same.
func (e *Error) Reply() (code int, reason, message string) { return e.Code, e.Reason, e.Message }

// Header returns the headers of an error reply for err.
func (t Table) Header(err error) nats.Header {
	code, reason := t.Encode(err)
	text := err.Error()
	if r, ok := err.(Replier); ok {
		_, _, text = r.Reply()
	}
	text = Text(text)
	if text == "" {
		text = fmt.Sprintf("request failed (code %d)", code)
	}
	return nats.Header{
		HeaderError:  []string{text},
		HeaderCode:   []string{strconv.Itoa(code)},
		HeaderReason: []string{reason},
	}
}

// Respond answers req: body when err is nil, else an error reply for err.
// It always answers: a body the server refuses (larger than it takes) is
// replaced by a 500 saying so.
func (t Table) Respond(req micro.Request, body []byte, err error) {
	if err == nil {
		if req.Respond(body) == nil {
			return
		}
		err = fmt.Errorf("the reply of %d bytes does not fit in a NATS message", len(body))
	}
	h := t.Header(err)
	if req.Error(h.Get(HeaderCode), h.Get(HeaderError), nil, micro.WithHeaders(micro.Headers{HeaderReason: h[HeaderReason]})) != nil {
		_ = req.Error(h.Get(HeaderCode), "request failed (code "+h.Get(HeaderCode)+")", nil)
	}
}

// Reply answers a core NATS request m as [Table.Respond] answers a micro
// request.
func (t Table) Reply(m *nats.Msg, body []byte, err error) {
	if err == nil {
		if m.Respond(body) == nil {
			return
		}
		err = fmt.Errorf("the reply of %d bytes does not fit in a NATS message", len(body))
	}
	reply := nats.NewMsg(m.Reply)
	reply.Header = t.Header(err)
	_ = m.RespondMsg(reply)
}

// ErrorOf returns the error a reply carries, nil when it is not an error
// reply. A code that is not a number is a 500.
func ErrorOf(msg *nats.Msg) *Error {
	codeText := msg.Header.Get(HeaderCode)
	if codeText == "" {
		return nil
	}
	code, err := strconv.Atoi(codeText)
	if err != nil {
		code = CodeInternal
	}
	return &Error{Code: code, Reason: msg.Header.Get(HeaderReason), Message: Text(msg.Header.Get(HeaderError))}
}

// Decode decodes body, a request of at most maxSize bytes, into v, a
// pointer to a struct: one JSON object, with no field v does not have and
// nothing after it. want shows a valid body in the error. Errors match
// [ErrBadRequest] and quote at most [MaxEcho] bytes of the request.
func Decode(body []byte, v any, maxSize int, want string) error {
	if maxSize > 0 && len(body) > maxSize {
		return fmt.Errorf("%w: it is %d bytes: at most %d are taken", ErrBadRequest, len(body), maxSize)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return fmt.Errorf("%w: empty: want JSON like %s", ErrBadRequest, want)
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object (starts with %s): want JSON like %s", ErrBadRequest, Quote(string(trimmed[:min(len(trimmed), MaxEcho)])), want)
	}
	if err := checkKeys(body, v); err != nil {
		return fmt.Errorf("%w: %v: want JSON like %s", ErrBadRequest, err, want)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: want JSON like %s", ErrBadRequest, jsonText(err), want)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the JSON object (at byte %d): send one object: want JSON like %s", ErrBadRequest, dec.InputOffset(), want)
	}
	return nil
}

// checkKeys refuses a top-level key v's struct does not spell exactly
// (encoding/json matches keys case-insensitively: "ID" would be taken for
// "id") and a key given twice (the last would win silently). A body that
// does not tokenize is left to the decoder to refuse.
func checkKeys(body []byte, v any) error {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil
		}
		switch {
		case seen[key]:
			return fmt.Errorf("field %s given twice", Quote(key))
		case !names[key]:
			for name := range names {
				if strings.EqualFold(name, key) {
					return fmt.Errorf("unknown field %s: field names are case-sensitive (%q)", Quote(key), name)
				}
			}
			return fmt.Errorf("unknown field %s", Quote(key))
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// jsonText is a JSON decoding error's message, with what it quotes of the
// request (an unknown field's name) cut as Quote cuts it.
func jsonText(err error) string {
	s := err.Error()
	const unknown = "json: unknown field "
	if rest, ok := strings.CutPrefix(s, unknown); ok {
		if field, err := strconv.Unquote(rest); err == nil {
			return "unknown field " + Quote(field)
		}
	}
	s = strings.TrimPrefix(s, "json: ")
	if len(s) > 2*MaxEcho {
		return Prefix(s, 2*MaxEcho) + "…"
	}
	return s
}

// Quote quotes s for an error text, cut to its first [MaxEcho] bytes (on a
// rune boundary) plus "…" and its length when longer.
func Quote(s string) string {
	if len(s) <= MaxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(Prefix(s, MaxEcho)), len(s))
}

// Prefix is s cut to at most n bytes, on a rune boundary.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Text is an error text as a reply carries it: on one line (a header value
// cannot hold a line break) and at most [MaxErrorText] bytes, cut on a rune
// boundary with "…".
func Text(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	}
	if len(s) <= MaxErrorText {
		return s
	}
	return Prefix(s, MaxErrorText) + "…"
}
