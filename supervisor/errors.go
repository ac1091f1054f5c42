package supervisor

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; errors answered by the
// orchestration API come back as *APIError, which matches them too.
var (
	// ErrInvalid: a request, definition or option is malformed (400).
	ErrInvalid = errors.New("invalid")
	// ErrUnknownOrchestration: no orchestration has that id (404).
	ErrUnknownOrchestration = errors.New("unknown orchestration")
	// ErrUnknownName: no orchestration definition has that name on the
	// supervisors answering (404).
	ErrUnknownName = errors.New("no orchestration definition by that name")
	// ErrNotWaiting: input was given to an orchestration that is not
	// waiting for input, e.g. a second input while the first is being
	// processed (409).
	ErrNotWaiting = errors.New("orchestration is not waiting for input")
	// ErrFinished: the orchestration is COMPLETED, FAILED or CANCELLED and
	// takes no input and no cancel (410).
	ErrFinished = errors.New("orchestration already finished")
	// ErrUnavailable: no supervisor answered the request, or a worker a
	// task goes to cannot be created because no node hosts its kind (503).
	ErrUnavailable = errors.New("unavailable")
	// ErrTooLarge: an orchestration's record (its state, results and
	// checkpoint) outgrew what NATS stores in one message (1 MB by default);
	// the orchestration FAILED with an error saying so.
	ErrTooLarge = errors.New("orchestration state too large")
	// ErrConflict: another supervisor changed the orchestration at the same
	// time, too often to retry (409). Retry the request.
	ErrConflict = errors.New("orchestration changed concurrently")
)

// Codes of the orchestration API's error replies (header
// Nats-Service-Error-Code).
const (
	CodeInvalid     = 400
	CodeNotFound    = 404
	CodeConflict    = 409
	CodeFinished    = 410
	CodeInternal    = 500
	CodeUnavailable = 503
)

// APIError is an error answered by an orchestration endpoint: the code,
// reason and text of its error headers (Nats-Service-Error-Code,
// EA-Error-Reason, Nats-Service-Error). It matches the sentinel its code and
// reason stand for with errors.Is: 400 ErrInvalid, 404
// ErrUnknownOrchestration (reason unknown_orchestration) or ErrUnknownName
// (unknown_name), 409 ErrNotWaiting (not_waiting) or ErrConflict
// (conflict), 410 ErrFinished, 503 ErrUnavailable. The text is never read
// to decide.
type APIError struct {
	Code    int
	Reason  string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("orchestration API: %d %s", e.Code, e.Message)
}

// Is reports whether the error stands for target (see the type's doc).
func (e *APIError) Is(target error) bool { return apiErrors.Is(e.Code, e.Reason, target) }

// Reply returns the code, reason and message the error is answered with.
func (e *APIError) Reply() (code int, reason, message string) { return e.Code, e.Reason, e.Message }

// codeOf returns the API code for err.
func codeOf(err error) int {
	code, _ := apiErrors.Encode(err)
	return code
}

// StepError is how an orchestration failed: the step (graph node) and what
// went wrong there. Status.Error holds its text.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// TaskError is a worker's error record, as a remote step sees it when
// its task failed: Worker is the effector that answered, Message its text,
// Attempt the attempt number of the step.
type TaskError struct {
	Worker  string
	Message string
	Attempt int
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("task failed on %s (attempt %d): %s", e.Worker, e.Attempt, e.Message)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// InputError is input an orchestration cannot take (it does not fit what
// the waiting step expects). A node that returns it (AwaitInput does) makes
// the input request fail with ErrInvalid; the orchestration keeps waiting.
type InputError struct{ Err error }

func (e *InputError) Error() string        { return "bad input: " + e.Err.Error() }
func (e *InputError) Unwrap() error        { return e.Err }
func (e *InputError) Is(target error) bool { return target == ErrInvalid }
