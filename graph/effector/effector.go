// Package effector hosts a compiled graph as an effector kind (the seed's
// createLangGraphAgent): every record the effector receives runs the graph
// once, starting from the effector's state, and the graph's final state is
// the effector's new state.
//
//	g, err := b.Compile() // no checkpointer: the state document is the checkpoint
//	kind, err := effector.Kind(actor.Kind[S]{Name: "agent"}, g)
//	err = node.Host(kind)
//
// # Inside the nodes
//
// Record and Decode give the record being handled; Self names the effector.
// Send, Emit and Reply send records the way actor.Context does: they are held
// until the whole graph succeeds, then published in a deterministic order
// (by step, then by the task's position in its step, then by call order), so
// a retried record publishes the same records under the same ids and the
// stream's duplicate window drops repeats. Sends of a node attempt that
// failed and was retried by the node's RetryPolicy are discarded.
//
// # Errors
//
// Nothing a graph does crashes the node. A node error that exhausted its
// RetryPolicy is returned to the runtime (retried with the kind's backoff,
// then dead-lettered, the state document showing ERROR with the message).
// Errors retrying cannot fix go to dead letters at once (actor.Permanent):
// a panic in a node, router or reducer, an invalid update, the recursion
// limit, errors marked graph.Permanent or actor.Permanent, and, for Kind,
// an interrupt (host graphs that ask for input with InputKind).
//
// # Waiting for input
//
// InputKind hosts a graph whose nodes call graph.Ask: the effector then
// waits (State.Status WAITING, the questions in State.Waiting and on its
// outbox as TypeInterrupt records) until a TypeResume record answers, and
// the graph resumes where it paused.
package effector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
)

// Kind returns k with its Logic running g: each record runs g with the
// effector's state as input (graph.Replace). k.Logic must be nil and g must
// have no checkpointer (the state document is the graph's checkpoint).
// Options: Live (what is published on the outbox while the graph runs).
func Kind[S any](k actor.Kind[S], g *graph.Graph[S], opts ...Option) (actor.Kind[S], error) {
	if g == nil {
		return k, fmt.Errorf("%w: nil graph for kind %q", ErrInvalid, k.Name)
	}
	if k.Logic != nil {
		return k, fmt.Errorf("%w: kind %q already has Logic; the graph is its logic", ErrInvalid, k.Name)
	}
	if g.Checkpointer() != nil {
		return k, fmt.Errorf("%w: kind %q: compile the graph without a checkpointer; the effector's state document holds its state", ErrInvalid, k.Name)
	}
	o, err := buildOptions(k.Name, opts)
	if err != nil {
		return k, err
	}
	k.Logic = func(actx *actor.Context, s S) (S, error) {
		rc := &runCtx{actx: actx}
		ctx, lv, run := o.start(actx, context.WithValue(actx, runKey{}, rc))
		defer lv.close()
		res, err := g.Invoke(ctx, "", graph.Replace(s), run...)
		if err := lv.end(actx, err); err != nil {
			return s, classify(err)
		}
		if res.Interrupted() {
			in := res.Interrupts[0]
			return s, actor.Permanent(fmt.Errorf("graph interrupted at node %q: this kind cannot wait for input; host the graph with effector.InputKind", in.Node))
		}
		if err := rc.flush(); err != nil {
			return s, err
		}
		return res.State, nil
	}
	return k, nil
}

// classify marks the errors that retrying the record cannot fix.
func classify(err error) error {
	var pe *graph.PanicError
	var ie *graph.InvalidUpdateError
	var re *graph.RecursionError
	if errors.As(err, &pe) || errors.As(err, &ie) || errors.As(err, &re) ||
		graph.IsPermanent(err) || actor.IsPermanent(err) || errors.Is(err, graph.ErrInvalidGraph) ||
		errors.Is(err, graph.ErrNothingToResume) || errors.Is(err, graph.ErrAlreadyResumed) ||
		errors.Is(err, graph.ErrInvalidArgument) {
		return actor.Permanent(err)
	}
	return err
}

type runKey struct{}

// runCtx collects the records nodes send during one graph run.
type runCtx struct {
	actx *actor.Context
	mu   sync.Mutex
	outs []held
}

type held struct {
	step, index, attempt, n int
	task                    string
	send                    func(*actor.Context) error
}

func (rc *runCtx) add(ctx context.Context, send func(*actor.Context) error) error {
	info, ok := graph.Info(ctx)
	if !ok {
		return fmt.Errorf("%w: call Send, Emit and Reply with the context the node got", ErrNoRecord)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	// A new attempt of a task discards what its failed attempts sent.
	rc.outs = slices.DeleteFunc(rc.outs, func(h held) bool { return h.task == info.Task && h.attempt < info.Attempt })
	n := 0
	for _, h := range rc.outs {
		if h.task == info.Task {
			n++
		}
	}
	rc.outs = append(rc.outs, held{step: info.Step, index: info.Index, attempt: info.Attempt, n: n, task: info.Task, send: send})
	return nil
}

func (rc *runCtx) flush() error {
	slices.SortStableFunc(rc.outs, func(a, b held) int {
		return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.index, b.index), cmp.Compare(a.n, b.n))
	})
	for _, h := range rc.outs {
		if err := h.send(rc.actx); err != nil {
			return err
		}
	}
	return nil
}

func from(ctx context.Context) (*runCtx, error) {
	rc, ok := ctx.Value(runKey{}).(*runCtx)
	if !ok {
		return nil, ErrNoRecord
	}
	return rc, nil
}

// Record returns the record the effector is handling; false outside a graph
// run by an effector.
func Record(ctx context.Context) (records.Record, bool) {
	rc, err := from(ctx)
	if err != nil {
		return records.Record{}, false
	}
	return rc.actx.Record(), true
}

// Decode decodes the payload of the record in hand into v (msgpack or JSON,
// as its content type says). A payload that does not decode is a permanent
// error: returned from a node, the record goes to dead letters at once.
func Decode(ctx context.Context, v any) error {
	rc, err := from(ctx)
	if err != nil {
		return err
	}
	return rc.actx.Decode(v)
}

// Self returns the effector running the graph.
func Self(ctx context.Context) (records.Ref, bool) {
	rc, err := from(ctx)
	if err != nil {
		return records.Ref{}, false
	}
	return rc.actx.Self(), true
}

// Send sends a record to effector to once the graph succeeds (actor.Context.Send).
func Send(ctx context.Context, to records.Ref, typ string, payload any, opts ...actor.SendOption) error {
	rc, err := from(ctx)
	if err != nil {
		return err
	}
	if err := to.Validate(); err != nil {
		return fmt.Errorf("send to %s: %w", to, err)
	}
	return rc.add(ctx, func(a *actor.Context) error { return a.Send(to, typ, payload, opts...) })
}

// Emit publishes a record on the effector's outbox once the graph succeeds
// (actor.Context.Emit).
func Emit(ctx context.Context, typ string, payload any, opts ...actor.SendOption) error {
	rc, err := from(ctx)
	if err != nil {
		return err
	}
	return rc.add(ctx, func(a *actor.Context) error { return a.Emit(typ, payload, opts...) })
}

// Reply answers the record in hand once the graph succeeds
// (actor.Context.Reply); an error at once if the record has no EA-Reply.
func Reply(ctx context.Context, typ string, payload any, opts ...actor.SendOption) error {
	rc, err := from(ctx)
	if err != nil {
		return err
	}
	if rc.actx.Record().Reply == "" {
		return fmt.Errorf("reply to record %s: %w: it has no EA-Reply", rc.actx.Record().ID, actor.ErrInvalid)
	}
	return rc.add(ctx, func(a *actor.Context) error { return a.Reply(typ, payload, opts...) })
}
