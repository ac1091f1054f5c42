package core

import (
	"errors"
	"fmt"
)

// Code says what kind of failure an [Error] is. Callers switch on it.
type Code string

// The codes an [Error] carries.
const (
	// CodeFailed: the logic returned an error.
	CodeFailed Code = "failed"
	// CodePanic: the logic panicked; the error is a *PanicError.
	CodePanic Code = "panic"
	// CodeTimeout: the run's time limit passed.
	CodeTimeout Code = "timeout"
	// CodeCancelled: the caller's context ended or the run was cancelled.
	CodeCancelled Code = "cancelled"
	// CodePermission: the kind may not use that service, pipeline or tool.
	CodePermission Code = "permission"
	// CodeInvalid: a caller's input is malformed (bad name, duplicate, bad arguments).
	CodeInvalid Code = "invalid"
	// CodeNotFound: no pipeline or tool of that name is registered.
	CodeNotFound Code = "not_found"
	// CodeUnavailable: the service is not configured (for example no vector store).
	CodeUnavailable Code = "unavailable"
	// CodeProvider: the LLM provider failed (HTTP status, transport, bad answer).
	CodeProvider Code = "provider"
	// CodeSchema: the model's answer does not fit the requested type or schema.
	CodeSchema Code = "schema"
	// CodeSteps: a tool-call loop reached its step limit without a final answer.
	CodeSteps Code = "steps"
	// CodeApproval: a tool-call loop paused because a tool call needs an
	// approval nobody could give in the loop (no [Asker]); the cause is a
	// *[Pause] to resume from ([ResumeFrom]) once the answer is known.
	CodeApproval Code = "approval"
)

// Error is the one error type of agent services and the run bridge. Code says
// what happened, Op where, Err is the cause (reachable with errors.Is/As).
//
// errors.Is(err, core.ErrTimeout) matches any *Error with that code: the
// sentinels below are *Error values with only a Code.
type Error struct {
	Code Code
	// Op names the operation, e.g. "llm.generate", "pipeline summarise".
	Op string
	// Err is the cause; nil for a bare sentinel.
	Err error
}

// Sentinels, one per code. Match with errors.Is; use errors.As to get the *Error.
var (
	ErrFailed      = &Error{Code: CodeFailed}
	ErrPanic       = &Error{Code: CodePanic}
	ErrTimeout     = &Error{Code: CodeTimeout}
	ErrCancelled   = &Error{Code: CodeCancelled}
	ErrPermission  = &Error{Code: CodePermission}
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrNotFound    = &Error{Code: CodeNotFound}
	ErrUnavailable = &Error{Code: CodeUnavailable}
	ErrProvider    = &Error{Code: CodeProvider}
	ErrSchema      = &Error{Code: CodeSchema}
	ErrSteps       = &Error{Code: CodeSteps}
	ErrApproval    = &Error{Code: CodeApproval}
)

func (e *Error) Error() string {
	switch {
	case e.Op == "" && e.Err == nil:
		return string(e.Code)
	case e.Err == nil:
		return fmt.Sprintf("%s: %s", e.Op, e.Code)
	case e.Op == "":
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Op, e.Code, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches a sentinel *Error (one with only a Code) of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Err == nil && t.Code == e.Code
}

// Permanent reports whether retrying cannot fix e: permission, invalid
// input, unknown names, missing services, answers that do not fit, panics,
// and a tool loop paused for an approval (retrying would only pause again).
// With it every package's retries (actor, graph, task.Node) skip such an
// error, marked [retry.Permanent] or not; [Permanent] tests a whole chain.
func (e *Error) Permanent() bool {
	switch e.Code {
	case CodePermission, CodeInvalid, CodeNotFound, CodeUnavailable, CodeSchema, CodePanic, CodeApproval:
		return true
	}
	return false
}

// CodeOf returns the code of the outermost *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// E builds an *Error. A nil cause gives a bare error with code and op.
func E(code Code, op string, err error) *Error {
	return &Error{Code: code, Op: op, Err: err}
}

// Errorf builds an *Error whose cause is a formatted message (%w allowed).
func Errorf(code Code, op, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Err: fmt.Errorf(format, args...)}
}

// PanicError is the cause of a CodePanic error: the panic value and stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

// SchemaError is the cause of a CodeSchema error: the raw answer that did not fit.
type SchemaError struct {
	// Answer is what the model returned.
	Answer string
	// Err says why it does not fit.
	Err error
}

func (s *SchemaError) Error() string {
	a := s.Answer
	if len(a) > 200 {
		a = a[:200] + "…"
	}
	return fmt.Sprintf("answer does not fit the schema: %v (answer %q)", s.Err, a)
}

func (s *SchemaError) Unwrap() error { return s.Err }
