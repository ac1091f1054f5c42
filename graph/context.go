package graph

import (
	"context"
	"fmt"

	"github.com/effectors/effectors/internal/codec"
)

// NodeInfo describes the node run in progress; Info returns it from a node's
// context.
type NodeInfo struct {
	Thread  string // "" when the graph runs without a checkpointer
	Node    string
	Task    string // stable across retries, failures and resumes: an idempotency key
	Step    int    // the super-step being run (1 for the first)
	Index   int    // the task's position in its step: the order its update is applied in
	Attempt int    // 1 for the first attempt, then 2, ... under a RetryPolicy
	// Rerun is true when this task ran before and did not complete (it failed,
	// interrupted, or its process died): a node with side effects uses it
	// (with Task) to avoid doing them twice.
	Rerun bool
	// Resuming is true when the task is run again after an Interrupt and
	// Graph.Resume gave it input (see ResumeInput).
	Resuming bool
}

type nodeCtxKey struct{}

type nodeCtx struct {
	info   NodeInfo
	resume []byte
}

// Info returns the NodeInfo of the node run that ctx belongs to; false
// outside a node.
func Info(ctx context.Context) (NodeInfo, bool) {
	nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
	if !ok {
		return NodeInfo{}, false
	}
	return nc.info, true
}

// interruptSignal is the error Interrupt returns.
type interruptSignal struct {
	value []byte
	err   error
}

func (e *interruptSignal) Error() string {
	if e.err != nil {
		return "graph: interrupt: " + e.err.Error()
	}
	return "graph: node interrupted (waiting for input; the engine catches this, return it from the node)"
}

// Interrupt pauses the graph to wait for outside input (LangGraph's
// interrupt()). A node returns it as its error:
//
//	var answer string
//	ok, err := graph.ResumeInput(ctx, &answer)
//	if err != nil { return graph.Update[S]{}, err }
//	if !ok { return graph.Update[S]{}, graph.Interrupt(question) }
//	// use answer
//
// The step ends (siblings' writes are kept in the checkpoint), the run returns
// a Result whose Interrupts name the node and carry value (msgpack-encoded),
// and Graph.Resume later runs the node again from its start, with the input
// available through ResumeInput.
func Interrupt(value any) error {
	b, err := codec.Marshal(value)
	if err != nil {
		return &interruptSignal{err: fmt.Errorf("encode the interrupt value: %w", err)}
	}
	return &interruptSignal{value: b}
}

// ResumeInput decodes the input given to Graph.Resume into v (a pointer) and
// reports true when the running node is being resumed after an Interrupt;
// false (and v untouched) otherwise.
func ResumeInput(ctx context.Context, v any) (bool, error) {
	nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
	if !ok || !nc.info.Resuming {
		return false, nil
	}
	if len(nc.resume) == 0 {
		return true, nil
	}
	if err := codec.Unmarshal(nc.resume, v); err != nil {
		return true, fmt.Errorf("%w: resume input of node %q does not decode into %T: %v", ErrInvalidArgument, nc.info.Node, v, err)
	}
	return true, nil
}
