package retry

import "errors"

// ErrInvalid: a policy has a negative number, a Multiplier below 1 or a
// Jitter outside [0, 1) ([Policy.Validate]).
var ErrInvalid = errors.New("invalid retry policy")

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent reports true: the mark is permanent.
func (e *permanentError) Permanent() bool { return true }

// Permanent marks err as one that retrying cannot fix: no package retries
// it (an effector's record goes to dead letters at once, a graph node fails
// its step). The result wraps err, so errors.Is and errors.As still see
// through it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// permanent is implemented by errors that know whether retrying can fix
// them (core's *Error).
type permanent interface {
	Permanent() bool
}

// IsPermanent reports whether retrying cannot fix err: its chain holds an
// error marked with [Permanent] or, failing that, its first error with a
// Permanent() bool method says so.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var m *permanentError
	if errors.As(err, &m) {
		return true
	}
	var p permanent
	return errors.As(err, &p) && p.Permanent()
}
