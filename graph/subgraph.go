package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/effectors/effectors/internal/codec"
)

// AddSubgraph adds child, a compiled graph of the same state type, as node
// name of b: the node runs child from the parent's state, and child's final
// state is the node's update, applied as LangGraph applies a subgraph's
// output: every field declared on b is written with child's value, through
// its reducer — so a field with Append gets child's whole list appended,
// the items it started with included — and the fields b does not declare
// take child's values. A plain field is thus written by the node in every
// run (a sibling writing it in the same step is an *InvalidUpdateError, as
// in LangGraph), unless it is zero in both child's input and its final
// state: Go has no unset keys, and LangGraph leaves a key without a value
// out of a subgraph's output. To pass up only what child added, use
// AddSubgraphFunc with an out mapping. See AddSubgraphFunc for the rules.
func AddSubgraph[S any](b *Builder[S], name string, child *Graph[S], opts ...NodeOption) *Builder[S] {
	if child == nil {
		b.errs = append(b.errs, invalidGraph("subgraph %q: the child graph must not be nil", name))
		return b
	}
	return addSubgraph(b, name, child, func(s S) S { return s }, nil, opts)
}

// AddSubgraphFunc adds child, a compiled graph of state C, as node name of
// b (a LangGraph subgraph with an explicit input/output mapping): in maps
// the parent's state to child's input (applied as graph.Replace), out maps
// child's final state to the parent's update.
//
// Checkpoint namespaces: with a checkpointer, child runs in the parent's
// checkpointer on its own thread, SubgraphThread(task) for the node's task
// id (listed in Snapshot.Tasks), so its checkpoints, history and interrupts
// are reachable from the parent: read them with child.State(ctx, thread,
// UsingCheckpointer(parent.Checkpointer())). Interrupts inside child
// surface as the parent's (Interruption.Namespace says where) and resume
// through the parent (Resume, ResumeEach with their ids): child continues
// where it paused. A crash inside child is finished by the parent's
// Continue, which continues child's thread, not a new run of it. Custom,
// message and task stream parts of child's nodes reach the parent's stream
// with their Namespace. Without a checkpointer child runs in memory.
func AddSubgraphFunc[S, C any](b *Builder[S], name string, child *Graph[C], in func(S) C, out func(C) Update[S], opts ...NodeOption) *Builder[S] {
	if child == nil || in == nil || out == nil {
		b.errs = append(b.errs, invalidGraph("subgraph %q: the child graph and the mapping functions must not be nil", name))
		return b
	}
	return addSubgraph(b, name, child, in, out, opts)
}

// addSubgraph adds child as node name; a nil out (AddSubgraph, where C is
// S) makes child's final state the node's output (Update.output).
func addSubgraph[S, C any](b *Builder[S], name string, child *Graph[C], in func(S) C, out func(C) Update[S], opts []NodeOption) *Builder[S] {
	spec := b.addNode(name, func(ctx context.Context, s S) (Update[S], error) {
		nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
		if !ok {
			return Update[S]{}, invalidArg("subgraph %q run outside the engine", name)
		}
		input := in(s)
		c, err := runSubgraph(ctx, nc, child, input)
		if err != nil {
			return Update[S]{}, err
		}
		if out == nil { // AddSubgraph: C is S
			return Update[S]{output: any(&c).(*S), subIn: any(&input).(*S)}, nil
		}
		return out(c), nil
	}, opts)
	if spec != nil {
		spec.sub = true
	}
	return b
}

// SubgraphThread is the thread a subgraph node's task (a Task.ID, a
// NodeInfo.Task) runs its child graph on: the task id with its separators
// replaced, or a hash of it when that would be over 128 characters.
func SubgraphThread(task string) string {
	t := strings.ReplaceAll(task, ":", "_")
	if len(t) <= 128 && nameRE.MatchString(t) {
		return t
	}
	sum := sha256.Sum256([]byte(task))
	return "sub_" + hex.EncodeToString(sum[:16])
}

type subKey struct{}

// subParent tells a child graph's run where its parent streams, and under
// which namespace.
type subParent struct {
	child any // the *Graph[C] it is meant for
	fwd   func(part)
	ns    string
	store Store
	modes StreamMode
}

func runSubgraph[C any](ctx context.Context, nc *nodeCtx, child *Graph[C], input C) (C, error) {
	var zero C
	ns := nc.info.Node + ":" + nc.info.Task
	if nc.ns != "" {
		ns = nc.ns + "|" + ns
	}
	cctx := context.WithValue(ctx, subKey{}, &subParent{child: child, fwd: nc.sink, ns: ns, store: nc.store, modes: nc.modes})
	o := &runOpts{saver: nc.saver, own: true}
	start := func(r *run[C]) error { return child.start(cctx, r, Replace(input)) }
	sv := nc.saver
	if sv == nil {
		res, err := child.exec(cctx, "", o, start)
		return subResult(res, err)
	}
	thread := SubgraphThread(nc.info.Task)
	head, err := sv.Get(ctx, thread, "")
	switch {
	case errors.Is(err, ErrNotFound):
		return subResult(child.exec(cctx, thread, o, start))
	case err != nil:
		return zero, err
	case len(head.Next) == 0:
		// The child finished before the parent could checkpoint its step.
		var c C
		if err := codec.Unmarshal(head.State, &c); err != nil {
			return zero, fmt.Errorf("graph: decode the state of subgraph thread %q: %w", thread, err)
		}
		return c, nil
	}
	// Inputs for interrupts of the child that still wait for them.
	answers := map[string][]byte{}
	var pending []Interruption
	for _, in := range head.Interrupts {
		if len(in.Resume) > 0 {
			continue
		}
		pending = append(pending, in)
		if b, ok := nc.sub[in.key()]; ok {
			answers[in.key()] = b
		}
	}
	if len(answers) > 0 {
		return subResult(child.exec(cctx, thread, o, func(r *run[C]) error { return child.resumeEach(cctx, r, answers, false, nil) }))
	}
	res, err := child.exec(cctx, thread, o, func(r *run[C]) error { return child.cont(cctx, r) })
	if errors.Is(err, ErrWaitingForInput) {
		return zero, &interruptSignal{sub: pending}
	}
	return subResult(res, err)
}

func subResult[C any](res Result[C], err error) (C, error) {
	if err != nil {
		return res.State, err
	}
	if res.Interrupted() {
		return res.State, &interruptSignal{sub: res.Interrupts}
	}
	return res.State, nil
}
