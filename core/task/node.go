package task

import (
	"context"
	"slices"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/retry"
)

// End is the name a Route returns to end the run (graph.END).
const End = graph.END

// Node makes an agent one step over a state S, usable as a graph node
// (Node.Func) or in the sequential runtime (RunSequence): it selects the
// run's input from the state, collects the run (with Timeout, retried as
// Retry says), applies the result to the state, and says where to go next
// (Route).
type Node[S any] struct {
	Agent Agent
	// SelectInput maps the state to the agent's input. Required.
	SelectInput func(state S) (string, error)
	// ApplyResult returns the state after the run. Required.
	ApplyResult func(state S, res Result) (S, error)
	// Route, when set, names the node to run next from the new state, or
	// End; a reviewer sends work back this way. Nil: the next in order.
	Route func(state S) (string, error)
	// Timeout bounds each run; 0 for none.
	Timeout time.Duration
	// Retry, when set, retries a failed run with backoff (the one policy
	// type, retry.Policy; zero fields take retry.Default's, as an
	// effector's do: 4 attempts, 100ms doubling, at most 5s). Failures
	// retrying cannot fix are not retried (Permanent), nor those RetryOn
	// refuses. Nil: one attempt.
	Retry *actor.RetryPolicy
}

// Permanent reports whether retrying cannot fix err: marked permanent by any
// package (retry.Permanent, which actor.Permanent and graph.Permanent are), a
// core error retrying cannot fix (core.Permanent sees both), or a
// cancellation.
func Permanent(err error) bool {
	return core.Permanent(err) || core.CodeOf(err) == core.CodeCancelled
}

// Run runs the node once on state (its agent as often as Retry allows).
// Failures are *core.Error values (the run's, or CodeFailed for SelectInput
// and ApplyResult errors).
func (n Node[S]) Run(ctx context.Context, state S) (S, error) {
	const op = "task.node"
	if n.Agent == nil || n.SelectInput == nil || n.ApplyResult == nil {
		return state, core.Errorf(core.CodeInvalid, op, "a node needs Agent, SelectInput and ApplyResult")
	}
	in, err := n.SelectInput(state)
	if err != nil {
		return state, asCore(op+" select input", err)
	}
	var opts []Option
	if n.Timeout > 0 {
		opts = append(opts, Timeout(n.Timeout))
	}
	p := retryDefaults(n.Retry)
	var res Result
	for attempt := 1; ; attempt++ {
		res, err = Collect(ctx, n.Agent, in, opts...)
		if err == nil {
			break
		}
		if attempt >= p.Attempts || Permanent(err) || !p.Retryable(err) || ctx.Err() != nil {
			return state, err
		}
		t := time.NewTimer(p.Delay(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return state, core.E(core.CodeCancelled, op, context.Cause(ctx))
		}
	}
	next, err := n.ApplyResult(state, res)
	if err != nil {
		return state, asCore(op+" apply result", err)
	}
	return next, nil
}

// retryDefaults fills p as actor.Kind does (retry.Default); nil is one
// attempt.
func retryDefaults(p *actor.RetryPolicy) actor.RetryPolicy {
	if p == nil {
		return actor.RetryPolicy{Attempts: 1}
	}
	return p.Or(retry.Default())
}

// next returns where to go after node name on state: its Route, or the
// next in order (End after the last).
func (n Node[S]) next(state S, name string, order []string, nodes map[string]Node[S]) (string, error) {
	const op = "task.route"
	if n.Route == nil {
		i := slices.Index(order, name)
		if i+1 < len(order) {
			return order[i+1], nil
		}
		return End, nil
	}
	to, err := n.Route(state)
	if err != nil {
		return "", asCore(op+" "+name, err)
	}
	if to == End {
		return End, nil
	}
	if _, ok := nodes[to]; !ok {
		return "", core.Errorf(core.CodeInvalid, op, "node %q routed to %q, which is not a node", name, to)
	}
	return to, nil
}

// Func adapts the node to the graph engine: the new state is written with
// graph.Replace (so the node suits graphs whose steps run one node at a
// time). Routing is the graph's edges; Graph adds the node's Route.
func (n Node[S]) Func() graph.NodeFunc[S] {
	return func(ctx context.Context, state S) (graph.Update[S], error) {
		next, err := n.Run(ctx, state)
		if err != nil {
			return graph.Update[S]{}, err
		}
		return graph.Replace(next), nil
	}
}

// SequenceOption adjusts RunSequence.
type SequenceOption func(*seqConfig) error

type seqConfig struct{ maxSteps int }

// MaxSteps bounds the node runs of RunSequence (default 25, the graph
// engine's default recursion limit): a route that loops for ever ends with a
// CodeSteps error.
func MaxSteps(n int) SequenceOption {
	return func(c *seqConfig) error {
		if n < 1 {
			return core.Errorf(core.CodeInvalid, "task.sequence", "max steps must be at least 1, got %d", n)
		}
		c.maxSteps = n
		return nil
	}
}

// RunSequence is the sequential runtime: it runs nodes[order[0]] on the
// state, then the node it routes to (Node.Route; by default the next in
// order), until End, stopping at the first failure (returned with the state
// before the failing node). Each node retries as its Retry says.
func RunSequence[S any](ctx context.Context, nodes map[string]Node[S], order []string, state S, opts ...SequenceOption) (S, error) {
	cfg := seqConfig{maxSteps: graph.DefaultRecursionLimit}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return state, err
		}
	}
	if err := checkOrder(nodes, order); err != nil {
		return state, err
	}
	name := order[0]
	for step := 0; name != End; step++ {
		if step >= cfg.maxSteps {
			return state, core.Errorf(core.CodeSteps, "task.sequence", "no end after %d node runs (last %q)", cfg.maxSteps, name)
		}
		n := nodes[name]
		next, err := n.Run(ctx, state)
		if err != nil {
			return state, err
		}
		state = next
		if name, err = n.next(state, name, order, nodes); err != nil {
			return state, err
		}
	}
	return state, nil
}

// Graph builds the graph runtime's equivalent of RunSequence: START →
// order[0], each node made with Node.Func and followed by its Route (or the
// next in order, END after the last). Options go to Compile
// (graph.WithRecursionLimit is RunSequence's MaxSteps).
func Graph[S any](nodes map[string]Node[S], order []string, opts ...graph.Option) (*graph.Graph[S], error) {
	if err := checkOrder(nodes, order); err != nil {
		return nil, err
	}
	b := graph.New[S]()
	for i, name := range order {
		n := nodes[name]
		b.AddNode(name, func(ctx context.Context, state S) (graph.Update[S], error) {
			next, err := n.Run(ctx, state)
			if err != nil {
				return graph.Update[S]{}, err
			}
			to, err := n.next(next, name, order, nodes)
			if err != nil {
				return graph.Update[S]{}, graph.Permanent(err)
			}
			return graph.Replace(next).Goto(to), nil
		})
		def := graph.END
		if i+1 < len(order) {
			def = order[i+1]
		}
		b.AddEdge(name, def) // the default; the node routes itself with Goto
	}
	b.AddEdge(graph.START, order[0])
	g, err := b.Compile(opts...)
	if err != nil {
		return nil, core.E(core.CodeInvalid, "task.graph", err)
	}
	return g, nil
}

func checkOrder[S any](nodes map[string]Node[S], order []string) error {
	if len(order) == 0 {
		return core.Errorf(core.CodeInvalid, "task.sequence", "no nodes to run")
	}
	seen := map[string]bool{}
	for _, name := range order {
		if _, ok := nodes[name]; !ok {
			return core.Errorf(core.CodeInvalid, "task.sequence", "order names node %q, which is not in the map", name)
		}
		if seen[name] {
			return core.Errorf(core.CodeInvalid, "task.sequence", "node %q is named twice", name)
		}
		seen[name] = true
	}
	return nil
}
