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
// # Live runs
//
// What nodes write while the graph runs is published on the effector's
// outbox at once, not when the run ends, so that a UI shows a run in
// progress: message chunks (graph.WriteMessage, graph.StreamText: an LLM's
// tokens) as TypeMessage records and custom values (graph.WriteCustom) as
// TypeCustom records by default, and with Live(... | graph.StreamTasks) a
// TypeTask record when each node starts and ends (progress). Each carries
// an Event (node, task, step, data). They are published one at a time, in
// the order the nodes wrote them, and the node waits for each to be stored
// (a node cannot run ahead of its readers). A publish that fails stops the
// run with its error, retried or dead-lettered like any.
//
// Live records are progress, not outputs. The outputs of a record — what
// Send, Emit and Reply held — are published only when the whole graph
// succeeds, just before the state write that commits the record (design,
// section 6): they stay tied to the commit. Live records are published
// before the commit and are not part of it: a run that fails or is
// interrupted leaves its live records published and commits nothing.
//
// Their ids are deterministic: <input record id>:s<n>.<tag>
// (actor.Context.EmitNow), n counting the live records of the attempt from
// 0, and the tag signing the effector, the input's stream sequence and id
// and n. A retry (a failed attempt run again) or a redelivery (a node
// crashed mid-run) runs the graph again from the effector's state, and
// publishes the same ids again: within the outbox's duplicate window (2
// minutes by default) JetStream drops every position n the earlier attempt
// already published, and stores the ones beyond. A consumer therefore sees
// each position of an input's live stream once: the first attempt's
// records s0…sk, then, if the re-run goes further, the re-run's from sk+1
// on. When the live output is deterministic (the same nodes write the same
// things in the same order) that is exactly one run's stream. When it is
// not — an LLM answers differently, parallel nodes interleave differently
// — positions up to k come from the first attempt and the rest from the
// re-run. So treat live records as provisional: replace them with the
// committed outputs (the held records, the state, the state record with
// actor.Kind.StateRecords) when those arrive, and drop them when the record
// is dead-lettered. With graph.StreamTasks a failed node shows as a
// TypeTask "task_result" with an Error before the re-run. A redelivery
// later than the duplicate window publishes the live records again in
// full.
//
// # Stopping a run
//
// The run stops at its next node boundary (the graph checks its context
// before every super-step, and at END) when the logic's context ends:
//
//   - a cancel record of the record's process (actor.TypeCancel: a
//     supervisor cancelling its orchestration sends one to the workers of
//     its outstanding tasks), cause actor.ErrCancelled;
//   - terminating the effector (actor.Client.Terminate, `ea
//     terminate`): the node running it cancels the run, cause
//     actor.ErrCancelled and actor.ErrTerminated, and the end record is
//     written once the effector stopped (actor, "Terminating interrupts the
//     run in progress");
//   - the kind's Timeout.
//
// A node blocked in an LLM stream (core.LLM.Stream honours its context)
// stops at once: the HTTP response is closed. A node that ignores its
// context finishes first. Once the context ended nothing more is
// published live, the held outputs are dropped and the state is not
// written, even if the graph reached END; a cancelled record goes to dead
// letters (reason cancelled) without retries. So after a terminate nothing
// of the run is published after the end record, within the limits the
// actor package states (logic ignoring its context longer than 5 s).
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
