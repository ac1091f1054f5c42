package graph

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/effectors/effectors/internal/codec"
)

// State returns the thread's latest checkpoint, decoded. With
// UsingCheckpointer it reads that checkpointer (e.g. a subgraph's thread,
// kept in its parent's checkpointer).
func (g *Graph[S]) State(ctx context.Context, thread string, opts ...RunOption) (Snapshot[S], error) {
	sv := g.saverOf(runOptions(opts))
	if err := needSaver(sv, thread); err != nil {
		return Snapshot[S]{}, err
	}
	cp, err := sv.Get(ctx, thread, "")
	if err != nil {
		return Snapshot[S]{}, err
	}
	return g.snapshot(cp)
}

// History returns the thread's checkpoints newest first (at most limit; 0:
// all the checkpointer keeps). UsingCheckpointer as for State.
func (g *Graph[S]) History(ctx context.Context, thread string, limit int, opts ...RunOption) ([]Snapshot[S], error) {
	sv := g.saverOf(runOptions(opts))
	if err := needSaver(sv, thread); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, invalidArg("History: negative limit %d", limit)
	}
	cps, err := sv.List(ctx, thread, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot[S], 0, len(cps))
	for _, cp := range cps {
		s, err := g.snapshot(cp)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Fork makes a copy of checkpoint id of thread the head of newThread (of
// thread itself when newThread is ""): Continue, Resume or Invoke then run
// from there, while the history before the fork stays readable. The fork's
// tasks get new ids (a forked run is a new run for idempotency keys), so
// a subgraph the checkpoint had paused or left unfinished starts afresh in
// the fork (its child thread is not copied): its questions are asked again.
// The copy's step is the checkpoint's + 1, as LangGraph's fork checkpoint.
// UpdateState with At forks and edits in one call.
func (g *Graph[S]) Fork(ctx context.Context, thread, id, newThread string) (Snapshot[S], error) {
	sv := g.cfg.saver
	if err := needSaver(sv, thread); err != nil {
		return Snapshot[S]{}, err
	}
	if id == "" {
		return Snapshot[S]{}, invalidArg("Fork: give the id of the checkpoint to fork from (see History)")
	}
	dst := cmp.Or(newThread, thread)
	if err := checkThread(sv, dst); err != nil {
		return Snapshot[S]{}, err
	}
	release, err := g.claim(&runOpts{}, dst)
	if err != nil {
		return Snapshot[S]{}, err
	}
	defer release()
	src, err := sv.Get(ctx, thread, id)
	if err != nil {
		return Snapshot[S]{}, err
	}
	head, err := sv.Get(ctx, dst, "")
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Snapshot[S]{}, err
	}
	cp := forkOf(src, thread, head, dst)
	cp.Created = g.cfg.now()
	v, err := sv.Put(ctx, cp, head.Version)
	if err != nil {
		return Snapshot[S]{}, err
	}
	cp.Version = v
	return g.snapshot(cp)
}

// forkOf copies src (of thread) as the next checkpoint of dst after head,
// with new task ids. Its step follows src's, as LangGraph's fork checkpoint
// (update_state as "__copy__") does: steps count the super-steps of a
// branch of history, so a thread's steps repeat after a fork (its order is
// the checkpoints' Seq).
func forkOf(src Checkpoint, thread string, head Checkpoint, dst string) Checkpoint {
	cp := src
	cp.Thread = dst
	cp.Seq = head.Seq + 1
	cp.ID = FormatID(cp.Seq)
	cp.Parent = head.ID
	cp.ForkOf = thread + "/" + src.ID
	cp.Source = SourceFork
	cp.Step = src.Step + 1
	ids := map[string]string{}
	cp.Next = make([]Task, len(src.Next))
	for i, t := range src.Next {
		nt := t
		nt.ID = taskID(dst, cp.Seq, i)
		ids[t.ID] = nt.ID
		cp.Next[i] = nt
	}
	cp.Writes = make([]PendingWrite, 0, len(src.Writes))
	for _, w := range src.Writes {
		w.Task = ids[w.Task]
		cp.Writes = append(cp.Writes, w)
	}
	cp.Memos = make([]Memo, 0, len(src.Memos))
	for _, m := range src.Memos {
		m.Task = ids[m.Task]
		cp.Memos = append(cp.Memos, m)
	}
	cp.Interrupts = make([]Interruption, 0, len(src.Interrupts))
	for _, in := range src.Interrupts {
		if in.Namespace == "" {
			in.ID = "" // recomputed from the new task id
		}
		in.Task = ids[in.Task]
		in.ID = in.key()
		cp.Interrupts = append(cp.Interrupts, in)
	}
	return cp
}

// UpdateOption says how UpdateState applies its update.
type UpdateOption func(*updateOpts)

type updateOpts struct {
	asNode string
	at     string
}

// AsNode applies the update as if node had written it (LangGraph's
// update_state(values, as_node)): the next step's tasks are computed from
// node's edges (or the update's Goto and Sends), replacing the pending ones.
// START is allowed: the update then counts as a run's input.
func AsNode(node string) UpdateOption { return func(o *updateOpts) { o.asNode = node } }

// At edits checkpoint id instead of the thread's head: the result is a fork
// of that checkpoint, written as the thread's new head in one call (Fork
// then UpdateState).
func At(id string) UpdateOption { return func(o *updateOpts) { o.at = id } }

// UpdateState applies upd to the thread's latest state (or to checkpoint At)
// through the reducers, as if a node had written it, and checkpoints the
// result as the thread's head, with the step after the edited checkpoint's
// (LangGraph's update_state). For human-in-the-loop edits.
//
// Without AsNode the pending tasks stay as they were — unless upd carries a
// Goto or Sends, which then become the next step (on a finished thread
// too; Continue runs them). With AsNode the next step is computed from that
// node's edges. Either way the pending writes and interrupts of the
// replaced step are dropped. A Goto or Send to an unknown node, or an
// unknown AsNode, is an error (ErrInvalidUpdate, ErrInvalidArgument);
// nothing is written.
func (g *Graph[S]) UpdateState(ctx context.Context, thread string, upd Update[S], opts ...UpdateOption) (Snapshot[S], error) {
	sv := g.cfg.saver
	if err := needSaver(sv, thread); err != nil {
		return Snapshot[S]{}, err
	}
	var o updateOpts
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.asNode != "" && o.asNode != START && g.nodes[o.asNode] == nil {
		return Snapshot[S]{}, invalidArg("UpdateState: AsNode(%q): no such node", o.asNode)
	}
	release, err := g.claim(&runOpts{}, thread)
	if err != nil {
		return Snapshot[S]{}, err
	}
	defer release()
	head, err := sv.Get(ctx, thread, "")
	if err != nil {
		return Snapshot[S]{}, err
	}
	base, step := head, head.Step+1
	if o.at != "" && o.at != head.ID {
		src, err := sv.Get(ctx, thread, o.at)
		if err != nil {
			return Snapshot[S]{}, err
		}
		base, step = forkOf(src, thread, head, thread), src.Step+1
	}
	var st S
	if err := codec.Unmarshal(base.State, &st); err != nil {
		return Snapshot[S]{}, fmt.Errorf("graph: decode the state of thread %q: %w", thread, err)
	}
	node := cmp.Or(o.asNode, "__update__")
	t := &task[S]{Task: Task{Node: node, ID: "update"}}
	results := []taskResult[S]{{upd: upd}}
	st, _, err = g.apply(st, []*task[S]{t}, results, step, false)
	if err != nil {
		return Snapshot[S]{}, err
	}
	cp := base
	cp.Seq = head.Seq + 1
	cp.ID = FormatID(cp.Seq)
	cp.Parent = head.ID
	if o.at == "" || o.at == head.ID {
		cp.ForkOf = ""
	}
	cp.Source = SourceUpdate
	cp.Step = step
	cp.Created = g.cfg.now()
	if cp.State, err = codec.Marshal(st); err != nil {
		return Snapshot[S]{}, fmt.Errorf("graph: encode the state: %w", err)
	}
	if o.asNode != "" || upd.routed {
		r := &run[S]{thread: thread, saver: sv, state: st, step: step, seq: head.Seq}
		next, err := g.route(ctx, r, []*task[S]{t}, results, step)
		if err != nil {
			return Snapshot[S]{}, err
		}
		if cp.Next, err = encodeNext(next); err != nil {
			return Snapshot[S]{}, err
		}
		cp.Writes, cp.Interrupts, cp.Memos = nil, nil, nil
	}
	v, err := sv.Put(ctx, cp, head.Version)
	if err != nil {
		return Snapshot[S]{}, err
	}
	cp.Version = v
	return g.snapshot(cp)
}
