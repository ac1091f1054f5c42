package graph

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/effectors/effectors/internal/codec"
)

// NodeInfo describes the node run in progress; Info returns it from a node's
// context.
type NodeInfo struct {
	Thread  string // "" when the graph runs without a checkpointer
	Node    string
	Task    string // stable across retries, failures and resumes: an idempotency key
	Step    int    // the super-step being run
	Index   int    // the task's position in its step: the order its update is applied in
	Attempt int    // 1 for the first attempt, then 2, ... under a RetryPolicy
	// Rerun is true when this task ran before and did not complete (it failed,
	// interrupted, or its process died): a node with side effects uses it
	// (with Task) to avoid doing them twice.
	Rerun bool
	// Resuming is true when the task is run again after an interrupt and
	// Graph.Resume gave it input (see Ask and ResumeInput).
	Resuming bool
}

type nodeCtxKey struct{}

// nodeCtx is what a node's context carries.
type nodeCtx struct {
	info    NodeInfo
	answers [][]byte          // recorded values of the task's Ask and Once calls, in call order
	given   [][]byte          // inputs given to the task's interrupts (ResumeInput reads the last)
	sub     map[string][]byte // inputs for the interrupts of a subgraph, by id
	saver   Checkpointer      // the run's checkpointer, for subgraphs
	store   Store             // the graph's (or its parent's) Store
	ns      string            // the run's namespace
	sink    func(part)        // nil: nobody streams parts
	modes   StreamMode        // the stream modes of the run (for subgraphs)

	mu       sync.Mutex
	calls    int            // Ask and Once calls so far in this attempt
	produced map[int][]byte // Once results recorded in this run, by call index
}

func (nc *nodeCtx) reset() {
	nc.mu.Lock()
	nc.calls = 0
	nc.mu.Unlock()
}

// next reserves the next call index and returns its recorded value, if any.
func (nc *nodeCtx) next() (int, []byte, bool) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	k := nc.calls
	nc.calls++
	if k < len(nc.answers) {
		return k, nc.answers[k], true
	}
	b, ok := nc.produced[k]
	return k, b, ok
}

func (nc *nodeCtx) record(k int, b []byte) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.produced == nil {
		nc.produced = map[int][]byte{}
	}
	nc.produced[k] = b
}

// values is what the task has recorded, in call order, up to the first gap.
func (nc *nodeCtx) values() [][]byte {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	out := slices.Clone(nc.answers)
	for {
		b, ok := nc.produced[len(out)]
		if !ok {
			return out
		}
		out = append(out, b)
	}
}

func (nc *nodeCtx) emit(p part) {
	if nc.sink == nil {
		return
	}
	p.ns, p.node, p.task, p.step = nc.ns, nc.info.Node, nc.info.Task, nc.info.Step
	nc.sink(p)
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

// interruptSignal is the error Interrupt and Ask return to pause a node.
type interruptSignal struct {
	value []byte
	index int            // call order within the task; -1: after the answers given (Interrupt)
	sub   []Interruption // a subgraph's interrupts, surfacing
	err   error
}

func (e *interruptSignal) Error() string {
	if e.err != nil {
		return "graph: interrupt: " + e.err.Error()
	}
	return "graph: node interrupted (waiting for input; the engine catches this, return it from the node)"
}

// Is matches ErrInterrupted.
func (e *interruptSignal) Is(target error) bool { return target == ErrInterrupted && e.err == nil }

// Ask pauses the graph for outside input and returns that input, decoded
// into T (LangGraph's interrupt(value)):
//
//	name, err := graph.Ask[string](ctx, "name?")
//	if err != nil {
//		return graph.Update[S]{}, err // pauses here the first time
//	}
//
// The first time, Ask returns an error the node must return (wrapped or
// not): the step ends (siblings' writes are kept), the run returns a Result
// whose Interrupts carry value, and Graph.Resume later runs the node again
// from its start. Then the first Ask returns the input. A node may Ask any
// number of times: the inputs are matched to the calls by call order, so
// the calls must come in the same order on every run; each unanswered Ask
// pauses the graph again. Input that does not decode into T is an error
// wrapping ErrInvalidArgument.
func Ask[T any](ctx context.Context, value any) (T, error) {
	var zero T
	nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
	if !ok {
		return zero, invalidArg("graph.Ask called outside a node; pass it the context the node got")
	}
	k, rec, ok := nc.next()
	if ok {
		var v T
		if err := codec.Unmarshal(rec, &v); err != nil {
			return zero, fmt.Errorf("%w: input %d of node %q does not decode into %T: %v", ErrInvalidArgument, k, nc.info.Node, v, err)
		}
		return v, nil
	}
	b, err := codec.Marshal(value)
	if err != nil {
		return zero, &interruptSignal{err: fmt.Errorf("encode the interrupt value %T: %w", value, err)}
	}
	return zero, &interruptSignal{value: b, index: k}
}

// Interrupt is the error form of Ask: a node returns it to pause for input,
// and reads the input with ResumeInput when it runs again:
//
//	var answer string
//	ok, err := graph.ResumeInput(ctx, &answer)
//	if err != nil { return graph.Update[S]{}, err }
//	if !ok { return graph.Update[S]{}, graph.Interrupt(question) }
//
// It counts as the node's next interrupt after the inputs it already got.
// Prefer Ask, which also handles several questions per node.
func Interrupt(value any) error {
	b, err := codec.Marshal(value)
	if err != nil {
		return &interruptSignal{err: fmt.Errorf("encode the interrupt value: %w", err)}
	}
	return &interruptSignal{value: b, index: -1}
}

// ResumeInput decodes the latest input given to the running node by
// Graph.Resume into v (a pointer) and reports true when the node is being
// resumed after an interrupt; false (and v untouched) otherwise.
func ResumeInput(ctx context.Context, v any) (bool, error) {
	nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
	if !ok || !nc.info.Resuming {
		return false, nil
	}
	if len(nc.given) == 0 {
		return true, nil
	}
	if err := codec.Unmarshal(nc.given[len(nc.given)-1], v); err != nil {
		return true, fmt.Errorf("%w: resume input of node %q does not decode into %T: %v", ErrInvalidArgument, nc.info.Node, v, err)
	}
	return true, nil
}

// key is the interrupt's id: ID, or for checkpoints written before ids,
// <task>#<index>.
func (i Interruption) key() string {
	if i.ID != "" {
		return i.ID
	}
	return i.Task + "#" + strconv.Itoa(i.Index)
}

// Once runs fn once per task of the graph and records its result, so that
// when the node runs again — resumed after an Ask, or continued after a
// failure — the call returns the recorded result instead of running fn
// again (LangGraph's @task inside an @entrypoint, see Entrypoint). Calls
// are matched to results by call order, shared with Ask: make Once and Ask
// calls in the same order on every run, one at a time, and do not call Ask
// inside fn (ask before or after it). An error of fn is returned and
// nothing is recorded. Outside a node Once just runs fn.
func Once[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
	if !ok {
		return fn(ctx)
	}
	k, rec, ok := nc.next()
	if ok {
		var v T
		if err := codec.Unmarshal(rec, &v); err != nil {
			return zero, fmt.Errorf("%w: recorded result %d of node %q does not decode into %T: %v", ErrInvalidArgument, k, nc.info.Node, v, err)
		}
		return v, nil
	}
	v, err := fn(ctx)
	if err != nil {
		return v, err
	}
	b, err := codec.Marshal(v)
	if err != nil {
		return v, fmt.Errorf("graph: Once: encode the result %T: %w", v, err)
	}
	nc.record(k, b)
	return v, nil
}
