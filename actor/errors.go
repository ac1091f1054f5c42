package actor

import (
	"errors"
	"fmt"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/retry"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNotFound: no effector with that kind and id was created.
	ErrNotFound = errors.New("effector not found")
	// ErrExists: an effector with that kind and id already exists (perhaps terminated).
	ErrExists = errors.New("effector already exists")
	// ErrTerminated: the effector was terminated; it accepts no more records.
	ErrTerminated = errors.New("effector terminated")
	// ErrNoHost: no running node hosts the kind.
	ErrNoHost = errors.New("no node hosts the kind")
	// ErrNotLoaded: the effector to activate ([Client.Activate]) could not
	// be loaded because its partition is changing hands (no node reads it
	// right now); retry shortly.
	ErrNotLoaded = errors.New("effector's partition is not read by any node right now")
	// ErrNoKindEndpoint: no node answers the kind endpoint
	// ([Client.Kind]): no node runs, or the nodes predate it.
	ErrNoKindEndpoint = errors.New("no node answers the kind endpoint")
	// ErrInvalid: a request, record or definition is malformed.
	ErrInvalid = errors.New("invalid")
	// ErrDuplicateKind: a node was asked to host one kind twice.
	ErrDuplicateKind = errors.New("kind already hosted")
	// ErrRunning: the node is running; hosting must happen before Run.
	ErrRunning = errors.New("node already running")
	// ErrNotRunning: the node is not running (Run returned, or never ran).
	ErrNotRunning = errors.New("node not running")
	// ErrCancelled is the cause (context.Cause) of a logic context cancelled
	// by a cancel record (type [TypeCancel]) of the same process.
	ErrCancelled = errors.New("cancelled by a cancel record")
	// ErrForbidden: a record may not be sent to that subject (see
	// [Options].ReplySubjects). It is [bus.ErrForbidden].
	ErrForbidden = bus.ErrForbidden
	// ErrTooLarge: a record is too large for the NATS server (its max_payload,
	// headers included, or JetStream's 64 KiB header limit). It is
	// [bus.ErrTooLarge].
	ErrTooLarge = bus.ErrTooLarge
	// ErrStateMismatch: a state document names another effector than its key
	// (<kind>.<id>) says. The runtime never writes such a document, and
	// reading one is an error rather than a state to act on.
	ErrStateMismatch = errors.New("state document does not match its key")
	// ErrCorruptState: a state document cannot be used: it does not decode
	// as a document, or names another effector ([ErrStateMismatch]). The
	// effector's records go to dead letters (reason corrupt_state) until an
	// operator resets it ([Client.Reset], <prefix>.ctl.reset.<kind>) or
	// terminates it. The error is a [*CorruptStateError].
	ErrCorruptState = errors.New("state document is corrupt")
)

// CorruptStateError is the error of reading a state document that cannot be
// used. It matches [ErrCorruptState], and [ErrStateMismatch] when the
// document names another effector; Err is the decoding error or the
// mismatch.
type CorruptStateError struct {
	// Key is the state key, <kind>.<id>.
	Key string
	// Revision is the revision of the corrupt document (0 when unknown).
	Revision uint64
	Err      error
}

func (e *CorruptStateError) Error() string {
	return fmt.Sprintf("state document %s (revision %d) is corrupt: %v", e.Key, e.Revision, e.Err)
}

// Unwrap returns the decoding error or the mismatch.
func (e *CorruptStateError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorruptState.
func (e *CorruptStateError) Is(target error) bool { return target == ErrCorruptState }

// TypeCancel is the record type that cancels running logic: a record of this
// type arriving in an effector's mailbox with EA-Process P cancels the
// context of the logic running on a record of process P, and of records of
// process P held behind it (up to Kind.Window records of a partition are held), with cause
// [ErrCancelled]. Logic that then returns nil succeeds as usual; logic that
// returns an error sends its record to dead letters at once (reason
// "cancelled"), without retries. The cancel record itself is then handled by
// the logic like any other record. Send it with EA-Priority high so it
// overtakes the records held.
const TypeCancel = "cancel"

// Permanent marks err as one that retrying cannot fix: logic that returns it
// sends the record to dead letters at once, without retries. It is
// [retry.Permanent], the one mark every package honours (graph.Permanent is
// the same). Permanent(nil) is nil.
func Permanent(err error) error { return retry.Permanent(err) }

// IsPermanent reports whether retrying cannot fix err: it is
// [retry.IsPermanent], so it sees errors marked by any package
// (actor.Permanent, graph.Permanent) and core errors whose code retrying
// cannot fix.
func IsPermanent(err error) bool { return retry.IsPermanent(err) }

// UnknownType is the permanent error for a record type the logic does not
// handle; such a record goes to dead letters at once.
func UnknownType(typ string) error {
	return Permanent(fmt.Errorf("%w: unknown record type %q", ErrInvalid, typ))
}

// PanicError is the error a panicking logic becomes. The record goes to dead
// letters at once with the panic value; the stack is logged.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("logic panicked: %v", e.Value) }

// ControlError is an error answered by a control endpoint, with its HTTP-like
// code (400, 404, 409, 410, 503, 500) and reason (header EA-Error-Reason:
// invalid, not_found, exists, corrupt_state, terminated, no_host,
// not_loaded, internal). It matches the sentinel its code and reason stand
// for with errors.Is: 400 ErrInvalid, 404 ErrNotFound, 409 ErrExists or
// ErrCorruptState, 410 ErrTerminated, 503 ErrNoHost or ErrNotLoaded.
type ControlError struct {
	Code    int
	Reason  string
	Message string
}

func (e *ControlError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Is reports whether the error stands for target (see the type's doc).
func (e *ControlError) Is(target error) bool { return controlErrors.Is(e.Code, e.Reason, target) }

// Reply returns the code, reason and message the error is answered with.
func (e *ControlError) Reply() (code int, reason, message string) {
	return e.Code, e.Reason, e.Message
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
