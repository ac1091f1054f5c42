package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
)

// Definition is an orchestration definition ready to register on a
// Supervisor: a Spec of any state type, made by Define.
type Definition interface {
	// Name is the name Start takes.
	Name() string
	engine() engine
	workers() []records.Ref
	// claim marks the definition as registered; false if it already was.
	claim() bool
}

// Spec describes an orchestration whose steps are the nodes of a state
// graph (package graph) over state S. Nodes run in the supervisor; a node
// that calls Call is a remote step (it sends a task record to a worker
// effector and the orchestration waits for the answer), a node that calls
// AwaitInput waits for input. Routing after a step (conditional edges,
// Goto) decides what a worker's error leads to: a retry, an alternative
// path or a failure.
type Spec[S any] struct {
	// Name is the orchestration's name: 1-128 of [A-Za-z0-9_-].
	Name string
	// Graph holds the nodes and edges; Define compiles it with the
	// supervisor's checkpointer. Required.
	Graph *graph.Builder[S]
	// Input makes the initial state from the start input (JSON, "null" when
	// none was given). An error rejects the start with ErrInvalid. Default:
	// the input decoded as JSON into S.
	Input func(input json.RawMessage) (S, error)
	// Results is the view of the state that Status shows as results (it
	// must encode as JSON). Default: the state itself.
	Results func(S) any
	// Workers are the worker effectors the orchestration sends tasks to.
	// Start creates those that do not exist yet (through a node hosting
	// their kind), so a task never waits in the mailbox of an effector no
	// node drives. Workers a Call names that are not listed are created
	// when the first task goes to them. Optional.
	Workers []records.Ref
	// RecursionLimit bounds the super-steps of one change (between two
	// waits). Default graph.DefaultRecursionLimit.
	RecursionLimit int
	// Services are the agent services (package core) the orchestration's
	// nodes may use, limited by Permissions: a node reaches them with
	// core.From(ctx), for example to let a model choose the next step.
	// Token usage is counted under the orchestration's name. Optional.
	Services *core.Services
	// Permissions say which services, pipelines and tools the nodes may
	// use; anything else fails with a core.CodePermission error.
	Permissions core.Permissions
}

// Define checks spec and compiles its graph into a Definition.
func Define[S any](spec Spec[S]) (Definition, error) {
	if err := records.ValidateKind(spec.Name); err != nil {
		return nil, invalidf("define orchestration: name %q: %v", spec.Name, err)
	}
	if spec.Graph == nil {
		return nil, invalidf("define orchestration %q: Graph is nil: build one with graph.New", spec.Name)
	}
	saver := newRecordSaver()
	opts := []graph.Option{graph.WithCheckpointer(saver)}
	if spec.RecursionLimit != 0 {
		opts = append(opts, graph.WithRecursionLimit(spec.RecursionLimit))
	}
	g, err := spec.Graph.Compile(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: define orchestration %q: %w", ErrInvalid, spec.Name, err)
	}
	for _, w := range spec.Workers {
		if err := w.Validate(); err != nil {
			return nil, invalidf("define orchestration %q: worker: %v", spec.Name, err)
		}
	}
	e := &graphEngine[S]{name: spec.Name, g: g, saver: saver, input: spec.Input, results: spec.Results, workerRefs: spec.Workers}
	if spec.Services != nil {
		e.scope = spec.Services.Scope(spec.Name, spec.Permissions)
	}
	if e.input == nil {
		e.input = func(in json.RawMessage) (S, error) {
			var s S
			if len(in) == 0 || string(in) == "null" {
				return s, nil
			}
			err := json.Unmarshal(in, &s)
			return s, err
		}
	}
	if e.results == nil {
		e.results = func(s S) any { return s }
	}
	return e, nil
}

type graphEngine[S any] struct {
	name    string
	g       *graph.Graph[S]
	saver   *recordSaver
	input   func(json.RawMessage) (S, error)
	results func(S) any
	// workerRefs are Spec.Workers.
	workerRefs []records.Ref
	// scope is the nodes' view of Spec.Services; nil when none.
	scope   *core.Scope
	claimed atomic.Bool
}

// withScope puts the definition's services in ctx for its nodes.
func (e *graphEngine[S]) withScope(ctx context.Context) context.Context {
	if e.scope == nil {
		return ctx
	}
	return core.With(ctx, e.scope)
}

func (e *graphEngine[S]) claim() bool { return e.claimed.CompareAndSwap(false, true) }

func (e *graphEngine[S]) workers() []records.Ref { return e.workerRefs }

func (e *graphEngine[S]) Name() string   { return e.name }
func (e *graphEngine[S]) engine() engine { return e }

func (e *graphEngine[S]) start(ctx context.Context, id string, input json.RawMessage) (outcome, error) {
	s0, err := e.input(input)
	if err != nil {
		return outcome{}, invalidf("input of orchestration %q: %v", e.name, err)
	}
	if err := e.saver.load(id, nil); err != nil {
		return outcome{}, err
	}
	res, err := e.g.Invoke(e.withScope(ctx), id, graph.Replace(s0))
	return e.finish(ctx, id, res, err)
}

func (e *graphEngine[S]) resume(ctx context.Context, id string, cp []byte, answers []answer) (outcome, error) {
	if err := e.saver.load(id, cp); err != nil {
		return outcome{}, err
	}
	inputs := make(map[string]any, len(answers))
	for _, a := range answers {
		inputs[a.Key] = a
	}
	res, err := e.g.ResumeEach(e.withScope(ctx), id, inputs)
	return e.finish(ctx, id, res, err)
}

// finish turns a run's result into an outcome, taking the checkpoint.
func (e *graphEngine[S]) finish(ctx context.Context, id string, res graph.Result[S], runErr error) (outcome, error) {
	cp, err := e.saver.take(id)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{checkpoint: cp}
	state := res.State
	if runErr != nil {
		if !definitionFailure(runErr) || ctx.Err() != nil {
			return outcome{}, runErr
		}
		out.failed = runErr
		var ne *graph.NodeError
		if errors.As(runErr, &ne) {
			out.step = ne.Node
			out.failed = &StepError{Step: ne.Node, Err: ne.Err}
		}
		// The state of the last checkpoint, for the results.
		if snap, serr := e.snapshot(ctx, id, cp); serr == nil {
			state = snap
		}
	}
	b, err := json.Marshal(e.results(state))
	if err != nil {
		return outcome{}, fmt.Errorf("orchestration %q: results do not encode as JSON: %w", e.name, err)
	}
	out.results = b
	if runErr != nil {
		return out, nil
	}
	if !res.Interrupted() {
		out.done, out.step = true, graph.END
		return out, nil
	}
	for _, in := range res.Interrupts {
		var req request
		if err := in.Decode(&req); err != nil || (req.Kind != requestTask && req.Kind != requestInput) {
			out.failed = &StepError{Step: in.Node, Err: fmt.Errorf("%w: the node paused with graph.Interrupt directly; use supervisor.Call or supervisor.AwaitInput", ErrInvalid)}
			out.step = in.Node
			return out, nil
		}
		out.waits = append(out.waits, wait{key: in.Task, step: in.Node, req: req})
		if out.step == "" || req.Kind == requestInput {
			out.step = in.Node
		}
	}
	return out, nil
}

// snapshot decodes the state of checkpoint cp.
func (e *graphEngine[S]) snapshot(ctx context.Context, id string, cp []byte) (S, error) {
	var s S
	if len(cp) == 0 {
		return s, errors.New("no checkpoint")
	}
	if err := e.saver.load(id, cp); err != nil {
		return s, err
	}
	defer e.saver.drop(id)
	snap, err := e.g.State(ctx, id)
	if err != nil {
		return s, err
	}
	return snap.State, nil
}

// definitionFailure reports whether a run's error is the orchestration's
// own (a node failed, a bad update, the recursion limit): it fails the
// orchestration. Other errors (storage, context) are the supervisor's and are
// retried.
func definitionFailure(err error) bool {
	var pe *graph.PanicError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, graph.ErrNodeFailed), errors.Is(err, graph.ErrInvalidUpdate),
		errors.Is(err, graph.ErrRecursionLimit), errors.As(err, &pe):
		return true
	}
	return false
}
