package task

import (
	"context"
	"time"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/graph"
)

// Node makes an agent one step over a state S, usable as a graph node
// (Node.Func) or in a sequential runtime (RunSequence): it selects the run's
// input from the state, collects the run (with Timeout), and applies the
// result to the state.
type Node[S any] struct {
	Agent Agent
	// SelectInput maps the state to the agent's input. Required.
	SelectInput func(state S) (string, error)
	// ApplyResult returns the state after the run. Required.
	ApplyResult func(state S, res Result) (S, error)
	// Timeout bounds the run; 0 for none.
	Timeout time.Duration
}

// Run runs the node once on state. Failures are *core.Error values (the
// run's, or CodeFailed for SelectInput and ApplyResult errors).
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
	res, err := Collect(ctx, n.Agent, in, opts...)
	if err != nil {
		return state, err
	}
	next, err := n.ApplyResult(state, res)
	if err != nil {
		return state, asCore(op+" apply result", err)
	}
	return next, nil
}

// Func adapts the node to the graph engine: the new state is written with
// graph.Replace (so the node suits graphs whose steps run one node at a time).
func (n Node[S]) Func() graph.NodeFunc[S] {
	return func(ctx context.Context, state S) (graph.Update[S], error) {
		next, err := n.Run(ctx, state)
		if err != nil {
			return graph.Update[S]{}, err
		}
		return graph.Replace(next), nil
	}
}

// RunSequence is the sequential runtime: it runs nodes[order[0]], then
// nodes[order[1]], … on the state, stopping at the first failure (returned
// with the state before the failing node).
func RunSequence[S any](ctx context.Context, nodes map[string]Node[S], order []string, state S) (S, error) {
	if err := checkOrder(nodes, order); err != nil {
		return state, err
	}
	for _, name := range order {
		next, err := nodes[name].Run(ctx, state)
		if err != nil {
			return state, err
		}
		state = next
	}
	return state, nil
}

// Graph builds the graph runtime's equivalent of RunSequence: START →
// order[0] → … → END, each node made with Node.Func. Options go to Compile.
func Graph[S any](nodes map[string]Node[S], order []string, opts ...graph.Option) (*graph.Graph[S], error) {
	if err := checkOrder(nodes, order); err != nil {
		return nil, err
	}
	b := graph.New[S]()
	prev := graph.START
	for _, name := range order {
		b.AddNode(name, nodes[name].Func())
		b.AddEdge(prev, name)
		prev = name
	}
	b.AddEdge(prev, graph.END)
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
