package remote

import (
	"errors"
	"fmt"
)

// Errors of a remote kind's logic. The node treats them as it treats any
// logic error: retryable ones are retried with the kind's retry policy, then
// dead-lettered; permanent ones (marked with retry.Permanent) are
// dead-lettered at once, with the message in EA-Error.
var (
	// ErrInvalid: a remote kind's options are invalid ([New]).
	ErrInvalid = errors.New("remote: invalid")
	// ErrNoWorker: no worker listens on the kind's logic subject (NATS
	// answered "no responders"). Retryable: a worker may start meanwhile.
	ErrNoWorker = errors.New("remote: no worker serves the kind")
	// ErrTimeout: no reply within the timeout; the worker may have died
	// holding the record. Retryable: the node commits nothing, so the retry
	// (by any worker) cannot apply the record twice.
	ErrTimeout = errors.New("remote: worker did not reply in time")
	// ErrMalformed: the worker's reply breaks the contract of
	// docs/polyglot.md (does not decode, misses the state, too large, a
	// record to send that is invalid or not allowed). Always permanent: the
	// record goes to dead letters with the reason.
	ErrMalformed = errors.New("remote: malformed reply")
	// ErrConvert: the record's payload or the state cannot be carried in the
	// kind's encoding (e.g. a msgpack map with integer keys has no JSON
	// form). Permanent; use the msgpack encoding for such data.
	ErrConvert = errors.New("remote: cannot convert")
	// ErrWorker is matched by every [*WorkerError].
	ErrWorker = errors.New("remote: worker failed")
)

// WorkerError is an error a worker answered explicitly
// ({"error": {"message": ..., "permanent": ...}}). It matches [ErrWorker].
// A permanent one comes wrapped in retry.Permanent (retry.IsPermanent
// reports true); a retryable one is retried with the kind's policy.
type WorkerError struct {
	// Kind is the remote kind whose worker failed.
	Kind string
	// Message is the worker's message, cut to 1 KiB.
	Message string
	// Permanent is what the worker said: retrying cannot fix it.
	Permanent bool
}

func (e *WorkerError) Error() string {
	what := "retryable"
	if e.Permanent {
		what = "permanent"
	}
	return fmt.Sprintf("worker of kind %s failed (%s): %s", e.Kind, what, e.Message)
}

// Unwrap returns [ErrWorker].
func (e *WorkerError) Unwrap() error { return ErrWorker }
