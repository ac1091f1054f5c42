package kv

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a [Store] returns wraps at most one of them,
// with the bucket, the operation and the key in its message; test with
// [errors.Is].
var (
	// ErrNotFound means the key has no value: it was never written, or its
	// latest revision is a delete or purge marker, or the requested revision
	// does not exist (any more). [Open] also wraps it when the bucket does
	// not exist.
	ErrNotFound = errors.New("not found")

	// ErrExists is returned by [Store.Create] when the key already has a
	// value.
	ErrExists = errors.New("already exists")

	// ErrConflict means a compare-and-set lost: the key's latest revision is
	// not the one the caller expected. The error is a [*ConflictError].
	ErrConflict = errors.New("revision conflict")

	// ErrInvalidKey means a key or key pattern is not valid. Keys are tokens
	// of letters, digits and - _ / = separated by single dots; patterns may
	// also use * for one token and > for the rest. Checked before any I/O.
	ErrInvalidKey = errors.New("invalid key")
)

// ConflictError is returned by [Store.Update] (and by [Store.Modify] once its
// retries are spent) when the key's latest revision is not Expected: another
// writer got there first. Read the key again and retry, or use
// [Store.Modify]. It matches [ErrConflict] with [errors.Is].
type ConflictError struct {
	// Key is the key that was updated.
	Key string
	// Expected is the revision the caller expected to be the latest.
	Expected uint64
}

// Error says which key and revision conflicted.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %q is no longer at revision %d", ErrConflict, e.Key, e.Expected)
}

// Unwrap returns [ErrConflict].
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Is reports whether target is [ErrConflict].
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// DecodeError is returned when a stored value does not decode into the
// store's type, typically because the type changed since the value was
// written, or because something other than a [Store] wrote the key. Reach it
// with [errors.As].
type DecodeError struct {
	// Key is the key whose value did not decode.
	Key string
	// Revision is the revision that did not decode.
	Revision uint64
	// Type is the Go type the value was decoded into, e.g. "main.Counter".
	Type string
	// Err is the decoder's error.
	Err error
}

// Error names the key, the revision and the type, and suggests the likely
// cause.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("value of %q at revision %d does not decode into %s (did the type change since it was written?): %v",
		e.Key, e.Revision, e.Type, e.Err)
}

// Unwrap returns the decoder's error.
func (e *DecodeError) Unwrap() error { return e.Err }
