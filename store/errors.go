package store

import (
	"errors"
	"fmt"
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
func (e *ServiceError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Code == 400
	case ErrBadCursor:
		return e.Kind == "bad_cursor"
	case ErrPageTooLarge:
		return e.Kind == "page_too_large"
	case ErrUnknownKind:
		return e.Kind == "unknown_kind"
	case ErrNotFound:
		return e.Code == 404
	case ErrUnavailable:
		return e.Code == 503
	}
	return false
}

// errorKind maps err to its service code and kind.
func errorKind(err error) (int, string) {
	switch {
	case errors.Is(err, ErrBadCursor):
		return 400, "bad_cursor"
	case errors.Is(err, ErrPageTooLarge):
		return 400, "page_too_large"
	case errors.Is(err, ErrUnknownKind):
		return 400, "unknown_kind"
	case errors.Is(err, ErrInvalid):
		return 400, "invalid"
	case errors.Is(err, ErrNotFound):
		return 404, "not_found"
	case errors.Is(err, ErrUnavailable):
		return 503, "unavailable"
	}
	return 500, "internal"
}
