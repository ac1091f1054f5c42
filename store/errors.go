package store

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/internal/service"
)

// Sentinel errors. Every error the store returns for a caller's mistake
// wraps [ErrInvalid] and, when one applies, a more precise sentinel, so
// errors.Is(err, ErrBadCursor) and errors.Is(err, ErrInvalid) both hold.
var (
	// ErrInvalid: a query, list or watch input is not valid.
	ErrInvalid = errors.New("invalid store request")
	// ErrBadCursor: a cursor that this store did not issue, or issued for
	// another query.
	ErrBadCursor = errors.New("bad cursor")
	// ErrPageTooLarge: a page size above [MaxLimit].
	ErrPageTooLarge = errors.New("page too large")
	// ErrUnknownKind: a kind no node announces and no state document has.
	ErrUnknownKind = errors.New("unknown kind")
	// ErrNotFound: no record with that id (or it aged out of the log).
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the store service did not answer (no server runs
	// it), or a stream or bucket it needs is missing.
	ErrUnavailable = errors.New("store unavailable")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// invalid wraps ErrInvalid and the precise sentinel kind.
func invalid(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{ErrInvalid, kind}, args...)...)
}

// HeaderKind is the header that also names the kind of a store service
// error, as the store answered before it joined the shared error table
// (whose reason header, EA-Error-Reason, carries the same value). Servers
// set both; clients read EA-Error-Reason, then this one.
const HeaderKind = "Ea-Store-Error"

// serviceErrors maps the store's errors to codes and kinds (reasons), for
// the server answering and the [Remote] reading the answer alike. Every 400
// matches [ErrInvalid], as the store's own errors all wrap it.
var serviceErrors = service.Table{
	{Err: ErrBadCursor, Code: 400, Reason: "bad_cursor", Also: []error{ErrInvalid}},
	{Err: ErrPageTooLarge, Code: 400, Reason: "page_too_large", Also: []error{ErrInvalid}},
	{Err: ErrUnknownKind, Code: 400, Reason: "unknown_kind", Also: []error{ErrInvalid}},
	{Err: ErrInvalid, Code: 400, Reason: "invalid"},
	{Err: ErrNotFound, Code: 404, Reason: "not_found"},
	{Err: ErrUnavailable, Code: 503, Reason: "unavailable"},
}

// ServiceError is an error answered by the store service over NATS, with
// its HTTP-like code (400 bad request, 404 not found, 503 unavailable,
// 500 internal). It matches the sentinel of its code and kind with
// errors.Is, so callers of a remote [Client] test errors the same way as
// those of a local one.
type ServiceError struct {
	Code    int
	Kind    string // "bad_cursor", "page_too_large", "unknown_kind", "invalid", "not_found", "unavailable", "internal"
	Message string
}

func (e *ServiceError) Error() string { return fmt.Sprintf("store service: %d %s", e.Code, e.Message) }

// Is matches the sentinel the code and kind stand for.
func (e *ServiceError) Is(target error) bool { return serviceErrors.Is(e.Code, e.Kind, target) }

// Reply returns the code, kind and message the error is answered with: a
// server relays it as it is.
func (e *ServiceError) Reply() (code int, kind, message string) { return e.Code, e.Kind, e.Message }

// errorHeader returns the headers of an error reply for err: those of the
// shared table, and [HeaderKind].
func errorHeader(err error) nats.Header {
	h := serviceErrors.Header(err)
	h[HeaderKind] = h[service.HeaderReason]
	return h
}
