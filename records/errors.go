package records

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors. Every error this package returns for bad input matches
// one of them with [errors.Is]; use [errors.As] with [*NameError],
// [*FieldError] or [*PayloadError] for the details.
var (
	// ErrInvalidName matches a [*NameError]: an effector kind, id or
	// reference that is not a valid subject token.
	ErrInvalidName = errors.New("records: invalid effector name")

	// ErrMalformed matches every error that says a record (its envelope or
	// its payload) is not well formed: [*FieldError] and [*PayloadError].
	// A record that fails with ErrMalformed will never succeed on retry.
	ErrMalformed = errors.New("records: malformed record")

	// ErrPayload matches a [*PayloadError]: a payload that is not well
	// formed for its content type, or that does not decode into the value
	// asked for. It always matches [ErrMalformed] too.
	ErrPayload = errors.New("records: invalid payload")
)

// NameError reports an invalid effector kind, id or reference.
// It matches [ErrInvalidName].
type NameError struct {
	// What was invalid: "kind", "id", or "ref" for a whole "<kind>/<id>"
	// reference that has no '/'.
	What string
	// Value is the rejected input, in full.
	Value string
	// Reason says what is allowed and what was found instead.
	Reason string
}

// Error says what was invalid, what is allowed and what was found, e.g.
// `invalid effector kind "a.b": must be 1-128 characters of A-Z a-z 0-9 _ - (got '.')`.
// Very long values are cut short.
func (e *NameError) Error() string {
	what := e.What
	if what == "ref" {
		what = "reference"
	}
	return "invalid effector " + what + " " + quote(e.Value) + ": " + e.Reason
}

// Is reports whether target is [ErrInvalidName].
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// FieldError reports an envelope field (a header) of a record that breaks
// the wire contract. It matches [ErrMalformed], and through Err whatever
// caused it (a [*NameError] for EA-From).
type FieldError struct {
	// Header is the wire name of the field, e.g. [HeaderType], even when
	// the message spelled the header key in another case.
	Header string
	// Value is the rejected value, in full.
	Value string
	// Reason says what is allowed and what was found instead.
	Reason string
	// Err is the underlying error, if any (a [*NameError] for [HeaderFrom]).
	Err error
}

// Error names the header, its value (cut short when very long), what is
// allowed and what was found.
func (e *FieldError) Error() string {
	return "malformed record: " + e.Header + " " + quote(e.Value) + ": " + e.Reason
}

// Is reports whether target is [ErrMalformed].
func (e *FieldError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns the underlying error, or nil.
func (e *FieldError) Unwrap() error { return e.Err }

// PayloadError reports a payload that is not well formed for its content
// type, or that could not be decoded into the value given to
// [Record.Decode]. It matches both [ErrPayload] and [ErrMalformed].
type PayloadError struct {
	// ContentType is the content type the payload was read as.
	ContentType string
	// Err says what was wrong.
	Err error
}

// Error names the content type and says what was wrong, e.g.
// "invalid application/msgpack payload: msgpack: 7 trailing bytes after
// the value at offset 1".
func (e *PayloadError) Error() string {
	ct := e.ContentType
	if ct == "" {
		ct = ContentMsgpack
	}
	return "invalid " + ct + " payload: " + e.Err.Error()
}

// Is reports whether target is [ErrPayload] or [ErrMalformed].
func (e *PayloadError) Is(target error) bool {
	return target == ErrPayload || target == ErrMalformed
}

// Unwrap returns the underlying error.
func (e *PayloadError) Unwrap() error { return e.Err }

// maxQuoted is how many bytes of a rejected value an error message shows.
const maxQuoted = 64

// quote returns s quoted for an error message, cut short when very long.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// describeAt describes the character of s at byte offset i for a "got"
// clause: '.' for a printable rune, '\x00' for a control character and
// '\xff' for a byte that is not valid UTF-8.
func describeAt(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf(`'\x%02x'`, s[i])
	}
	return strconv.QuoteRuneToASCII(r)
}
