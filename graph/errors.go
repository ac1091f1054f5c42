package graph

import (
	"errors"
	"fmt"
	"strings"

	"github.com/effectors/effectors/retry"
)

// Sentinel errors. Match them with errors.Is; the typed errors below match
// the sentinel of their kind too.
var (
	// ErrInvalidGraph: the builder was given a bad node, edge or field; Compile reports it.
	ErrInvalidGraph = errors.New("invalid graph")
	// ErrInvalidArgument: a call got a bad argument (empty or malformed thread id, nil value...).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidUpdate: a step's updates cannot be applied (see InvalidUpdateError).
	ErrInvalidUpdate = errors.New("invalid update")
	// ErrRecursionLimit: an invocation ran more super-steps than its limit (see RecursionError).
	ErrRecursionLimit = errors.New("recursion limit reached")
	// ErrConflict: another run wrote the thread's head first (see ConflictError).
	ErrConflict = errors.New("checkpoint conflict")
	// ErrNotFound: no such thread or checkpoint.
	ErrNotFound = errors.New("not found")
	// ErrNoCheckpointer: the call needs a checkpointer and the graph was compiled without one.
	ErrNoCheckpointer = errors.New("graph has no checkpointer")
	// ErrNothingToResume: the thread's latest checkpoint has no pending work.
	ErrNothingToResume = errors.New("nothing to resume")
	// ErrTooLarge: a checkpoint is too large for its checkpointer (see TooLargeError).
	ErrTooLarge = errors.New("checkpoint too large")
	// ErrNodeFailed: a node returned an error or panicked (see NodeError).
	ErrNodeFailed = errors.New("node failed")
	// ErrAlreadyResumed: Graph.Resume was called for interrupts that already got their input;
	// Graph.Continue finishes such a run (e.g. after a crash).
	ErrAlreadyResumed = errors.New("interrupt already resumed")
	// ErrWaitingForInput: Graph.Continue was called on a thread paused by an interrupt; use Graph.Resume.
	ErrWaitingForInput = errors.New("thread is waiting for input")
	// ErrInterrupted matches the error Ask and Interrupt return to pause a
	// node (the Err of a "task_result" stream event of a paused task).
	ErrInterrupted = errors.New("node interrupted")
	// ErrNotSupported: the call asks for something the engine does not do
	// (the message says what to do instead).
	ErrNotSupported = errors.New("not supported")
)

// RecursionError reports an invocation that would run more than Limit
// super-steps. The thread's checkpoint (if any) holds the state after the
// last step that ran, so raising the limit and calling Graph.Resume continues.
type RecursionError struct {
	Limit int // the limit in force (WithRecursionLimit, default 25)
}

func (e *RecursionError) Error() string {
	return fmt.Sprintf("graph: recursion limit of %d super-steps reached without hitting END; raise it with graph.WithRecursionLimit or check the graph for a cycle", e.Limit)
}

// Is matches ErrRecursionLimit.
func (e *RecursionError) Is(target error) bool { return target == ErrRecursionLimit }

// ConflictError reports that a thread's head moved under a writer: two runs
// of one thread raced and this one lost. Nothing was written; the thread's
// history stays linear. Re-read the thread (Graph.State) and decide.
type ConflictError struct {
	Thread string
	Detail string // what the checkpointer saw, for humans
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("graph: thread %q was written by another run (one writer per thread)", e.Thread)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// InvalidUpdateError reports a step whose updates cannot be applied: a plain
// (reducer-less) field written more than once in one super-step, a whole-state
// Merge without a state reducer, a Goto to an unknown node, and the like.
type InvalidUpdateError struct {
	Step   int
	Field  string   // the field concerned, if any
	Nodes  []string // the nodes whose updates clash, in application order
	Reason string
}

func (e *InvalidUpdateError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph: invalid update in step %d", e.Step)
	if e.Field != "" {
		fmt.Fprintf(&b, " to field %q", e.Field)
	}
	if len(e.Nodes) > 0 {
		fmt.Fprintf(&b, " from nodes %s", strings.Join(e.Nodes, ", "))
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Is matches ErrInvalidUpdate.
func (e *InvalidUpdateError) Is(target error) bool { return target == ErrInvalidUpdate }

// NodeError reports a node that failed after its retries. The thread's
// checkpoint keeps the successful writes of the other nodes of the step, so
// Graph.Resume re-runs only the failed ones.
type NodeError struct {
	Node     string
	Task     string // the task id (stable across retries and resumes)
	Step     int
	Attempts int
	Err      error
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("graph: node %q failed in step %d after %d attempt(s): %v", e.Node, e.Step, e.Attempts, e.Err)
}

// Unwrap returns the node's error.
func (e *NodeError) Unwrap() error { return e.Err }

// Is matches ErrNodeFailed.
func (e *NodeError) Is(target error) bool { return target == ErrNodeFailed }

// PanicError is what a panicking node, router or reducer becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("graph: panic: %v", e.Value) }

// TooLargeError reports a checkpoint whose encoding exceeds what its
// checkpointer can store (for the JetStream KV checkpointer: the connection's
// max payload, 1 MB by default). Nothing was written.
type TooLargeError struct {
	Thread string
	Size   int // encoded bytes
	Limit  int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("graph: checkpoint of thread %q is %d bytes, over the limit of %d; keep large data outside the state (store a reference) or raise the server's max_payload", e.Thread, e.Size, e.Limit)
}

// Is matches ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Permanent marks err so that a node's RetryPolicy does not retry it. It is
// [retry.Permanent], the one mark every package honours (actor.Permanent is
// the same): a node error marked here dead-letters an effector's record at
// once, and an effector's permanent error is not retried by a graph.
// Permanent(nil) is nil.
func Permanent(err error) error { return retry.Permanent(err) }

// IsPermanent reports whether retrying cannot fix err: it is
// [retry.IsPermanent], so it sees errors marked by any package
// (graph.Permanent, actor.Permanent) and core errors whose code retrying
// cannot fix.
func IsPermanent(err error) bool { return retry.IsPermanent(err) }

func invalidGraph(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidGraph}, a...)...)
}

func invalidArg(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, a...)...)
}

func notFound(thread, id string) error {
	if id == "" {
		return &notFoundError{thread: thread}
	}
	return &notFoundError{thread: thread, id: id}
}

type notFoundError struct{ thread, id string }

func (e *notFoundError) Error() string {
	if e.id == "" {
		return "graph: thread " + quote(e.thread) + " has no checkpoint"
	}
	return "graph: thread " + quote(e.thread) + " has no checkpoint " + quote(e.id)
}

func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

func quote(s string) string { return "\"" + s + "\"" }
