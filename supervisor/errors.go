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

// APIError is an error answered by an orchestration endpoint: the code and
// text of the NATS micro error headers. It matches the sentinel its code
// and text stand for with errors.Is.
type APIError struct {
	Code    int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("orchestration API: %d %s", e.Code, e.Message)
}

// Is maps codes to sentinels: 400 ErrInvalid, 404 ErrUnknownOrchestration
// or ErrUnknownName, 409 ErrNotWaiting or ErrConflict, 410 ErrFinished,
// 503 ErrUnavailable. Where one code stands for two sentinels the message
// (which starts with the sentinel's text) decides.
func (e *APIError) Is(target error) bool {
	switch e.Code {
	case CodeInvalid:
		return target == ErrInvalid
	case CodeNotFound:
		if hasPrefix(e.Message, ErrUnknownName.Error()) {
			return target == ErrUnknownName
		}
		return target == ErrUnknownOrchestration
	case CodeConflict:
		if hasPrefix(e.Message, ErrConflict.Error()) {
			return target == ErrConflict
		}
		return target == ErrNotWaiting
	case CodeFinished:
		return target == ErrFinished
	case CodeUnavailable:
		return target == ErrUnavailable
	}
	return false
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// codeOf returns the API code for err.
func codeOf(err error) int {
	switch {
	case errors.Is(err, ErrInvalid):
		return CodeInvalid
	case errors.Is(err, ErrUnknownOrchestration), errors.Is(err, ErrUnknownName):
		return CodeNotFound
	case errors.Is(err, ErrNotWaiting), errors.Is(err, ErrConflict):
		return CodeConflict
	case errors.Is(err, ErrFinished):
		return CodeFinished
	case errors.Is(err, ErrUnavailable):
		return CodeUnavailable
	}
	return CodeInternal
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
