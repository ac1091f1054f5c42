package graph

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/effectors/effectors/internal/codec"
)

// Graph is a compiled graph of state S, safe for concurrent use: many
// threads can run at once (one run per thread at a time, see ConflictError).
type Graph[S any] struct {
	nodes    map[string]*nodeSpec[S]
	order    []string
	edges    map[string][]string
	routers  map[string][]routerSpec[S]
	fanouts  map[string][]Fanout[S]
	fields   map[string]fieldDef[S]
	stateRed func(cur, upd S) S
	cfg      config

	mu      sync.Mutex
	running map[string]bool // threads with a run in this process
}

// Checkpointer returns the checkpointer the graph was compiled with, nil
// without one.
func (g *Graph[S]) Checkpointer() Checkpointer { return g.cfg.saver }

// claim marks thread as running in this process; a second run gets a
// *ConflictError at once instead of at its first checkpoint.
func (g *Graph[S]) claim(thread string) (func(), error) {
	if g.cfg.saver == nil || thread == "" {
		return func() {}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[thread] {
		return nil, &ConflictError{Thread: thread, Detail: "a run of this thread is in progress in this process"}
	}
	if g.running == nil {
		g.running = map[string]bool{}
	}
	g.running[thread] = true
	return func() {
		g.mu.Lock()
		delete(g.running, thread)
		g.mu.Unlock()
	}, nil
}

// Result is the outcome of a run that ended without error: it reached END,
// or it paused at interrupts (Interrupted).
type Result[S any] struct {
	State      S
	Step       int            // super-steps completed in the thread
	Interrupts []Interruption // non-empty: the run paused; call Graph.Resume
	Checkpoint string         // id of the thread's head ("" without a checkpointer)
}

// Interrupted reports whether the run paused at an interrupt.
func (r Result[S]) Interrupted() bool { return len(r.Interrupts) > 0 }

// Event is what Stream yields after each super-step: the updates applied and
// the full state after them. A run that pauses ends with an event whose
// Interrupts are set (and whose State is the state before the paused step).
type Event[S any] struct {
	Step       int
	Nodes      []string    // the tasks of the step, in application order
	Writes     []StepWrite // the field writes applied, in order
	State      S
	Checkpoint string
	Interrupts []Interruption
}

// StepWrite is one write applied in a step.
type StepWrite struct {
	Node  string
	Field string // "" for Replace and Merge
	Value any
}

// Snapshot is a checkpoint with its state decoded.
type Snapshot[S any] struct {
	Checkpoint Checkpoint
	State      S
	Next       []string // nodes of the next step; empty: the thread reached END
	Interrupts []Interruption
}

// task is one node run of a step.
type task[S any] struct {
	Task
	spec     *nodeSpec[S]
	index    int // position in its step
	arg      *S  // Send input
	done     bool
	upd      Update[S]
	rerun    bool
	resuming bool
	waiting  *Interruption // paused and not resumed: not run, stays paused
	resume   []byte
}

type taskResult[S any] struct {
	upd      Update[S]
	err      error
	attempts int
}

// run is the state of one invocation.
type run[S any] struct {
	thread  string
	state   S
	step    int
	next    []*task[S]
	seq     uint64
	headID  string
	version uint64
	ckpt    string
	stream  bool
}

func (g *Graph[S]) checkThread(thread string) error {
	if g.cfg.saver == nil {
		if thread != "" && !nameRE.MatchString(thread) {
			return invalidArg("thread id %q: use 1-128 letters, digits, - or _", thread)
		}
		return nil
	}
	if !nameRE.MatchString(thread) {
		return invalidArg("thread id %q: a graph with a checkpointer needs a thread id of 1-128 letters, digits, - or _", thread)
	}
	return nil
}

// Invoke runs the graph on thread with input applied at START (through the
// reducers, like a node's update), until END or an interrupt. With a
// checkpointer, a thread that has checkpoints continues from its latest
// state: input is merged into it and the run starts again at START (pending
// tasks of an unfinished run are dropped; use Continue or Resume to finish
// them). Without a checkpointer thread may be "".
func (g *Graph[S]) Invoke(ctx context.Context, thread string, input Update[S]) (Result[S], error) {
	release, err := g.claim(thread)
	if err != nil {
		return Result[S]{}, err
	}
	defer release()
	r, err := g.start(ctx, thread, input)
	if err != nil {
		return Result[S]{}, err
	}
	return g.loop(ctx, r, nil)
}

// Stream is Invoke yielding an Event after every super-step. It stops with
// an error when ctx ends, and when the loop breaks (the run then stops after
// the step in progress, which is checkpointed).
func (g *Graph[S]) Stream(ctx context.Context, thread string, input Update[S]) iter.Seq2[Event[S], error] {
	return func(yield func(Event[S], error) bool) {
		release, err := g.claim(thread)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		defer release()
		r, err := g.start(ctx, thread, input)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		r.stream = true
		g.streamLoop(ctx, r, yield)
	}
}

// Resume gives input to the interrupts the thread is paused at and runs on:
// each interrupted node runs again from its start and reads input with
// ResumeInput; nodes of that step that had completed are not run again.
// The input is checkpointed before anything runs, so a crash after Resume
// returns is finished by Continue. With ForTask only that task's interrupt
// gets the input. Errors: ErrNothingToResume (no interrupt pending, or none
// of that task), ErrAlreadyResumed (input already given).
func (g *Graph[S]) Resume(ctx context.Context, thread string, input any, opts ...ResumeOption) (Result[S], error) {
	release, err := g.claim(thread)
	if err != nil {
		return Result[S]{}, err
	}
	defer release()
	r, err := g.resume(ctx, thread, input, opts)
	if err != nil {
		return Result[S]{}, err
	}
	return g.loop(ctx, r, nil)
}

// ResumeEach gives each interrupt its own input: inputs maps an
// Interruption.Task to the input of that node (LangGraph's
// Command(resume={id: value})). Interrupts without an entry stay paused and
// their nodes are not run again; the step completes when the last of them
// is resumed. Errors as Resume; a task with no pending interrupt is
// ErrNothingToResume, one that already got input ErrAlreadyResumed.
func (g *Graph[S]) ResumeEach(ctx context.Context, thread string, inputs map[string]any) (Result[S], error) {
	if len(inputs) == 0 {
		return Result[S]{}, invalidArg("ResumeEach: no inputs; map interruption tasks to their inputs")
	}
	release, err := g.claim(thread)
	if err != nil {
		return Result[S]{}, err
	}
	defer release()
	r, err := g.resumeEach(ctx, thread, inputs, false, nil)
	if err != nil {
		return Result[S]{}, err
	}
	return g.loop(ctx, r, nil)
}

// StreamResume is Resume yielding an Event after every super-step.
func (g *Graph[S]) StreamResume(ctx context.Context, thread string, input any, opts ...ResumeOption) iter.Seq2[Event[S], error] {
	return func(yield func(Event[S], error) bool) {
		release, err := g.claim(thread)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		defer release()
		r, err := g.resume(ctx, thread, input, opts)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		r.stream = true
		g.streamLoop(ctx, r, yield)
	}
}

// Continue finishes a thread's unfinished run from its latest checkpoint:
// after a node failure, a recursion limit, a cancelled context or a crash.
// Tasks whose writes the checkpoint holds are not run again; the others run
// with NodeInfo.Rerun set. ErrNothingToResume if the thread reached END,
// ErrWaitingForInput if it is paused at an interrupt (use Resume).
func (g *Graph[S]) Continue(ctx context.Context, thread string) (Result[S], error) {
	release, err := g.claim(thread)
	if err != nil {
		return Result[S]{}, err
	}
	defer release()
	r, err := g.cont(ctx, thread)
	if err != nil {
		return Result[S]{}, err
	}
	return g.loop(ctx, r, nil)
}

// StreamContinue is Continue yielding an Event after every super-step.
func (g *Graph[S]) StreamContinue(ctx context.Context, thread string) iter.Seq2[Event[S], error] {
	return func(yield func(Event[S], error) bool) {
		release, err := g.claim(thread)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		defer release()
		r, err := g.cont(ctx, thread)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		r.stream = true
		g.streamLoop(ctx, r, yield)
	}
}

func (g *Graph[S]) streamLoop(ctx context.Context, r *run[S], yield func(Event[S], error) bool) {
	stopped := false
	res, err := g.loop(ctx, r, func(ev Event[S]) bool {
		if !yield(ev, nil) {
			stopped = true
			return false
		}
		return true
	})
	if stopped {
		return
	}
	if err != nil {
		yield(Event[S]{}, err)
		return
	}
	if res.Interrupted() {
		yield(Event[S]{Step: res.Step, State: res.State, Checkpoint: res.Checkpoint, Interrupts: res.Interrupts}, nil)
	}
}

// State returns the thread's latest checkpoint, decoded.
func (g *Graph[S]) State(ctx context.Context, thread string) (Snapshot[S], error) {
	if err := g.needSaver(thread); err != nil {
		return Snapshot[S]{}, err
	}
	cp, err := g.cfg.saver.Get(ctx, thread, "")
	if err != nil {
		return Snapshot[S]{}, err
	}
	return g.snapshot(cp)
}

// History returns the thread's checkpoints newest first (at most limit; 0:
// all the checkpointer keeps).
func (g *Graph[S]) History(ctx context.Context, thread string, limit int) ([]Snapshot[S], error) {
	if err := g.needSaver(thread); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, invalidArg("History: negative limit %d", limit)
	}
	cps, err := g.cfg.saver.List(ctx, thread, limit)
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
// tasks get new ids (a forked run is a new run for idempotency keys).
func (g *Graph[S]) Fork(ctx context.Context, thread, id, newThread string) (Snapshot[S], error) {
	if err := g.needSaver(thread); err != nil {
		return Snapshot[S]{}, err
	}
	release, err := g.claim(cmp.Or(newThread, thread))
	if err != nil {
		return Snapshot[S]{}, err
	}
	defer release()
	if id == "" {
		return Snapshot[S]{}, invalidArg("Fork: give the id of the checkpoint to fork from (see History)")
	}
	dst := newThread
	if dst == "" {
		dst = thread
	}
	if err := g.checkThread(dst); err != nil {
		return Snapshot[S]{}, err
	}
	src, err := g.cfg.saver.Get(ctx, thread, id)
	if err != nil {
		return Snapshot[S]{}, err
	}
	head, err := g.cfg.saver.Get(ctx, dst, "")
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Snapshot[S]{}, err
	}
	cp := src
	cp.Thread = dst
	cp.Seq = head.Seq + 1
	cp.ID = FormatID(cp.Seq)
	cp.Parent = head.ID
	cp.ForkOf = thread + "/" + src.ID
	cp.Source = SourceFork
	cp.Created = g.cfg.now()
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
	cp.Interrupts = make([]Interruption, 0, len(src.Interrupts))
	for _, in := range src.Interrupts {
		in.Task = ids[in.Task]
		cp.Interrupts = append(cp.Interrupts, in)
	}
	v, err := g.cfg.saver.Put(ctx, cp, head.Version)
	if err != nil {
		return Snapshot[S]{}, err
	}
	cp.Version = v
	return g.snapshot(cp)
}

// UpdateState applies upd to the thread's latest state through the reducers,
// as if a node had written it, and checkpoints the result; the pending tasks
// stay as they were. For human-in-the-loop edits.
func (g *Graph[S]) UpdateState(ctx context.Context, thread string, upd Update[S]) (Snapshot[S], error) {
	if err := g.needSaver(thread); err != nil {
		return Snapshot[S]{}, err
	}
	release, err := g.claim(thread)
	if err != nil {
		return Snapshot[S]{}, err
	}
	defer release()
	head, err := g.cfg.saver.Get(ctx, thread, "")
	if err != nil {
		return Snapshot[S]{}, err
	}
	var st S
	if err := codec.Unmarshal(head.State, &st); err != nil {
		return Snapshot[S]{}, fmt.Errorf("graph: decode the state of thread %q: %w", thread, err)
	}
	t := &task[S]{Task: Task{Node: "__update__"}}
	st, _, err = g.apply(st, []*task[S]{t}, []taskResult[S]{{upd: upd}}, head.Step, false)
	if err != nil {
		return Snapshot[S]{}, err
	}
	cp := head
	cp.Seq = head.Seq + 1
	cp.ID = FormatID(cp.Seq)
	cp.Parent = head.ID
	cp.ForkOf = ""
	cp.Source = SourceUpdate
	cp.Created = g.cfg.now()
	if cp.State, err = codec.Marshal(st); err != nil {
		return Snapshot[S]{}, fmt.Errorf("graph: encode the state: %w", err)
	}
	v, err := g.cfg.saver.Put(ctx, cp, head.Version)
	if err != nil {
		return Snapshot[S]{}, err
	}
	cp.Version = v
	return g.snapshot(cp)
}

func (g *Graph[S]) needSaver(thread string) error {
	if g.cfg.saver == nil {
		return ErrNoCheckpointer
	}
	return g.checkThread(thread)
}

func (g *Graph[S]) snapshot(cp Checkpoint) (Snapshot[S], error) {
	s := Snapshot[S]{Checkpoint: cp, Interrupts: cp.Interrupts}
	if err := codec.Unmarshal(cp.State, &s.State); err != nil {
		return s, fmt.Errorf("graph: decode the state of checkpoint %s of thread %q: %w", cp.ID, cp.Thread, err)
	}
	for _, t := range cp.Next {
		s.Next = append(s.Next, t.Node)
	}
	return s, nil
}

func taskID(thread string, seq uint64, i int) string {
	return thread + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.Itoa(i)
}

// start prepares an invocation: loads the thread, applies input at START.
func (g *Graph[S]) start(ctx context.Context, thread string, input Update[S]) (*run[S], error) {
	if err := g.checkThread(thread); err != nil {
		return nil, err
	}
	r := &run[S]{thread: thread}
	if g.cfg.saver != nil {
		head, err := g.cfg.saver.Get(ctx, thread, "")
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, err
		default:
			if err := codec.Unmarshal(head.State, &r.state); err != nil {
				return nil, fmt.Errorf("graph: decode the state of thread %q: %w", thread, err)
			}
			r.step, r.seq, r.headID, r.version = head.Step, head.Seq, head.ID, head.Version
		}
	}
	t := &task[S]{Task: Task{Node: START}}
	res := []taskResult[S]{{upd: input}}
	st, _, err := g.apply(r.state, []*task[S]{t}, res, r.step, false)
	if err != nil {
		return nil, err
	}
	r.state = st
	next, err := g.route(ctx, r, []*task[S]{t}, res)
	if err != nil {
		return nil, err
	}
	r.next = next
	if err := g.save(ctx, r, SourceInput, nil, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the thread's head into a run, with its pending writes and
// interrupts attached to the tasks.
func (g *Graph[S]) load(ctx context.Context, thread string) (*run[S], Checkpoint, error) {
	if err := g.needSaver(thread); err != nil {
		return nil, Checkpoint{}, err
	}
	head, err := g.cfg.saver.Get(ctx, thread, "")
	if err != nil {
		return nil, head, err
	}
	r := &run[S]{thread: thread, step: head.Step, seq: head.Seq, headID: head.ID, version: head.Version, ckpt: head.ID}
	if err := codec.Unmarshal(head.State, &r.state); err != nil {
		return nil, head, fmt.Errorf("graph: decode the state of thread %q: %w", thread, err)
	}
	writes := map[string]PendingWrite{}
	for _, w := range head.Writes {
		writes[w.Task] = w
	}
	ints := map[string]Interruption{}
	for _, in := range head.Interrupts {
		ints[in.Task] = in
	}
	for _, t := range head.Next {
		spec := g.nodes[t.Node]
		if spec == nil {
			return nil, head, fmt.Errorf("%w: thread %q waits for node %q, which this graph does not have", ErrInvalidGraph, thread, t.Node)
		}
		tk := &task[S]{Task: t, spec: spec, rerun: true}
		if t.Send {
			var a S
			if err := codec.Unmarshal(t.Arg, &a); err != nil {
				return nil, head, fmt.Errorf("graph: decode the Send input of task %s: %w", t.ID, err)
			}
			tk.arg = &a
		}
		if w, ok := writes[t.ID]; ok {
			u, err := g.decodeWrite(w)
			if err != nil {
				return nil, head, err
			}
			tk.done, tk.upd = true, u
		}
		if in, ok := ints[t.ID]; ok {
			if len(in.Resume) > 0 {
				tk.resuming, tk.resume = true, in.Resume
			} else {
				tk.waiting = &in
			}
		}
		r.next = append(r.next, tk)
	}
	return r, head, nil
}

// ResumeOption narrows what Resume gives its input to.
type ResumeOption func(*resumeOpts)

type resumeOpts struct{ task string }

// ForTask makes Resume give its input only to the interrupt of task (an
// Interruption.Task), for steps where several nodes wait at once (e.g. one
// per remote worker): the others stay paused, and the step completes when
// the last of them is resumed.
func ForTask(task string) ResumeOption { return func(o *resumeOpts) { o.task = task } }

func (g *Graph[S]) resume(ctx context.Context, thread string, input any, opts []ResumeOption) (*run[S], error) {
	var o resumeOpts
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	inputs := map[string]any{}
	if o.task != "" {
		inputs[o.task] = input
	}
	return g.resumeEach(ctx, thread, inputs, o.task == "", input)
}

// resumeEach gives inputs[task] to the interrupt of each task named (and
// rest to all others when all is set), records them, and prepares the run.
func (g *Graph[S]) resumeEach(ctx context.Context, thread string, inputs map[string]any, all bool, rest any) (*run[S], error) {
	r, head, err := g.load(ctx, thread)
	if err != nil {
		return nil, err
	}
	if len(head.Interrupts) == 0 {
		return nil, fmt.Errorf("%w: thread %q is not paused at an interrupt", ErrNothingToResume, thread)
	}
	found := map[string]bool{}
	for _, in := range head.Interrupts {
		found[in.Task] = true
	}
	for task := range inputs {
		if !found[task] {
			return nil, fmt.Errorf("%w: thread %q has no interrupt of task %q", ErrNothingToResume, thread, task)
		}
	}
	ints := make([]Interruption, len(head.Interrupts))
	given := 0
	for i, in := range head.Interrupts {
		ints[i] = in
		v, ok := inputs[in.Task]
		if !ok && all {
			v, ok = rest, true
		}
		if !ok {
			continue
		}
		if len(in.Resume) > 0 {
			if !all {
				return nil, fmt.Errorf("%w: the interrupt of node %q (task %q) of thread %q already got its input", ErrAlreadyResumed, in.Node, in.Task, thread)
			}
			continue
		}
		b, err := codec.Marshal(v)
		if err != nil {
			return nil, invalidArg("Resume: encode the input %T for task %q: %v", v, in.Task, err)
		}
		ints[i].Resume = b
		given++
	}
	if given == 0 {
		return nil, fmt.Errorf("%w: thread %q already got input for its interrupts; call Continue to finish the run", ErrAlreadyResumed, thread)
	}
	for _, t := range r.next {
		for _, in := range ints {
			if in.Task == t.ID && len(in.Resume) > 0 {
				t.resuming, t.resume, t.waiting = true, in.Resume, nil
			}
		}
	}
	// Record the input before running anything, keeping the pending writes.
	cp := head
	cp.Seq, cp.ID, cp.Parent, cp.ForkOf = head.Seq+1, FormatID(head.Seq+1), head.ID, ""
	cp.Source, cp.Created, cp.Interrupts = SourceResume, g.cfg.now(), ints
	v, err := g.cfg.saver.Put(ctx, cp, head.Version)
	if err != nil {
		return nil, err
	}
	r.seq, r.headID, r.version, r.ckpt = cp.Seq, cp.ID, v, cp.ID
	return r, nil
}

func (g *Graph[S]) cont(ctx context.Context, thread string) (*run[S], error) {
	r, head, err := g.load(ctx, thread)
	if err != nil {
		return nil, err
	}
	if len(head.Next) == 0 {
		return nil, fmt.Errorf("%w: thread %q reached END; Invoke starts a new run", ErrNothingToResume, thread)
	}
	for _, t := range r.next {
		if !t.done && t.waiting == nil {
			return r, nil
		}
	}
	in := head.Interrupts[0]
	return nil, fmt.Errorf("%w: node %q of thread %q is waiting; call Resume with its input", ErrWaitingForInput, in.Node, thread)
}

// loop runs super-steps until END, an interrupt, an error or the limit.
func (g *Graph[S]) loop(ctx context.Context, r *run[S], emit func(Event[S]) bool) (Result[S], error) {
	steps := 0
	for len(r.next) > 0 {
		if err := ctx.Err(); err != nil {
			return Result[S]{}, fmt.Errorf("graph: thread %q stopped before step %d: %w", r.thread, r.step+1, err)
		}
		if steps >= g.cfg.limit {
			return Result[S]{}, &RecursionError{Limit: g.cfg.limit}
		}
		steps++
		stepNo := r.step + 1
		tasks := r.next
		results := g.runTasks(ctx, r, tasks, stepNo)

		var failed error
		var ints []Interruption
		for i, res := range results {
			if res.err == nil {
				continue
			}
			var sig *interruptSignal
			if errors.As(res.err, &sig) && sig.err == nil {
				ints = append(ints, Interruption{Node: tasks[i].Node, Task: tasks[i].ID, Value: sig.value})
				continue
			}
			if failed == nil {
				failed = &NodeError{Node: tasks[i].Node, Task: tasks[i].ID, Step: stepNo, Attempts: res.attempts, Err: res.err}
			}
		}
		if failed != nil || len(ints) > 0 {
			if err := g.savePartial(ctx, r, tasks, results, ints); err != nil {
				return Result[S]{}, errors.Join(failed, err)
			}
			if failed != nil {
				return Result[S]{}, failed
			}
			return Result[S]{State: r.state, Step: r.step, Interrupts: ints, Checkpoint: r.ckpt}, nil
		}

		st, writes, err := g.apply(r.state, tasks, results, stepNo, r.stream)
		if err != nil {
			return Result[S]{}, err
		}
		r.state = st
		next, err := g.route(ctx, r, tasks, results)
		if err != nil {
			return Result[S]{}, err
		}
		r.step = stepNo
		r.next = next
		if err := g.save(ctx, r, SourceLoop, nil, nil); err != nil {
			return Result[S]{}, err
		}
		if emit != nil {
			nodes := make([]string, len(tasks))
			for i, t := range tasks {
				nodes[i] = t.Node
			}
			if !emit(Event[S]{Step: stepNo, Nodes: nodes, Writes: writes, State: r.state, Checkpoint: r.ckpt}) {
				return Result[S]{State: r.state, Step: r.step, Checkpoint: r.ckpt}, nil
			}
		}
	}
	return Result[S]{State: r.state, Step: r.step, Checkpoint: r.ckpt}, nil
}

// runTasks runs the step's tasks not already done, concurrently when more
// than one, and returns their results in task order.
func (g *Graph[S]) runTasks(ctx context.Context, r *run[S], tasks []*task[S], step int) []taskResult[S] {
	results := make([]taskResult[S], len(tasks))
	todo := 0
	for i, t := range tasks {
		t.index = i
		switch {
		case t.done:
			results[i] = taskResult[S]{upd: t.upd}
		case t.waiting != nil:
			results[i] = taskResult[S]{err: &interruptSignal{value: t.waiting.Value}}
		default:
			todo++
		}
	}
	if todo == 1 {
		for i, t := range tasks {
			if !t.done && t.waiting == nil {
				results[i] = g.runTask(ctx, r, t, step)
			}
		}
		return results
	}
	var wg sync.WaitGroup
	for i, t := range tasks {
		if t.done || t.waiting != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = g.runTask(ctx, r, t, step)
		}()
	}
	wg.Wait()
	return results
}

func (g *Graph[S]) runTask(ctx context.Context, r *run[S], t *task[S], step int) taskResult[S] {
	nc := &nodeCtx{
		info:   NodeInfo{Thread: r.thread, Node: t.Node, Task: t.ID, Step: step, Index: t.index, Rerun: t.rerun, Resuming: t.resuming},
		resume: t.resume,
	}
	nctx := context.WithValue(ctx, nodeCtxKey{}, nc)
	input := r.state
	if t.arg != nil {
		input = *t.arg
	}
	p := t.spec.retry
	for attempt := 1; ; attempt++ {
		nc.info.Attempt = attempt
		upd, err := callNode(nctx, t.spec.fn, input)
		if err == nil {
			return taskResult[S]{upd: upd, attempts: attempt}
		}
		if attempt >= max(p.Attempts, 1) || !p.retryable(err) {
			return taskResult[S]{err: err, attempts: attempt}
		}
		timer := time.NewTimer(p.delay(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return taskResult[S]{err: errors.Join(err, ctx.Err()), attempts: attempt}
		case <-timer.C:
		}
		nc.info.Rerun = true
	}
}

func callNode[S any](ctx context.Context, fn NodeFunc[S], s S) (upd Update[S], err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, s)
}

// apply applies the tasks' updates to st in task order and checks that no
// plain field is written twice.
func (g *Graph[S]) apply(st S, tasks []*task[S], results []taskResult[S], step int, collect bool) (S, []StepWrite, error) {
	var writes []StepWrite
	// Check writes first so that a bad step changes nothing.
	var seen map[string]string
	count := 0
	for _, res := range results {
		count += len(res.upd.writes)
		if res.upd.replace != nil || res.upd.merge != nil {
			count += 2
		}
	}
	if count > 1 {
		seen = map[string]string{}
	}
	replaced, wrote := "", "" // the node that replaced the state; the last node that wrote anything
	for i, res := range results {
		node := tasks[i].Node
		u := res.upd
		if u.replace != nil {
			if wrote != "" {
				return st, nil, &InvalidUpdateError{Step: step, Nodes: []string{wrote, node}, Reason: "Replace writes every field, so nothing else may write in the same step"}
			}
			replaced = node
		}
		if u.replace != nil || u.merge != nil || len(u.writes) > 0 {
			wrote = node
		}
		if u.merge != nil && g.stateRed == nil {
			return st, nil, &InvalidUpdateError{Step: step, Nodes: []string{node}, Reason: "Merge needs a whole-state reducer; declare it with Builder.StateReducer"}
		}
		for _, w := range u.writes {
			if w.field == nil {
				return st, nil, &InvalidUpdateError{Step: step, Nodes: []string{node}, Reason: "a zero Write; make writes with Field.Set"}
			}
			name := w.field.fieldName()
			if g.fields[name] != w.field {
				return st, nil, &InvalidUpdateError{Step: step, Field: name, Nodes: []string{node}, Reason: "the field was not declared on this graph's builder"}
			}
			if replaced != "" && replaced != node {
				return st, nil, &InvalidUpdateError{Step: step, Field: name, Nodes: []string{replaced, node}, Reason: "Replace writes every field, so nothing else may write in the same step"}
			}
			if w.field.reduced() || seen == nil {
				continue
			}
			if prev, ok := seen[name]; ok {
				return st, nil, &InvalidUpdateError{Step: step, Field: name, Nodes: []string{prev, node},
					Reason: "a plain field takes one write per super-step; declare it with graph.Reduced to merge parallel writes"}
			}
			seen[name] = node
		}
	}
	for i, res := range results {
		node := tasks[i].Node
		u := res.upd
		if u.replace != nil {
			st = *u.replace
			if collect {
				writes = append(writes, StepWrite{Node: node, Value: *u.replace})
			}
		}
		if u.merge != nil {
			if err := safe(func() { st = g.stateRed(st, *u.merge) }); err != nil {
				return st, nil, &NodeError{Node: node, Task: tasks[i].ID, Step: step, Attempts: 1, Err: fmt.Errorf("state reducer: %w", err)}
			}
			if collect {
				writes = append(writes, StepWrite{Node: node, Value: *u.merge})
			}
		}
		for _, w := range u.writes {
			if err := safe(func() { w.field.apply(&st, w.value) }); err != nil {
				return st, nil, &NodeError{Node: node, Task: tasks[i].ID, Step: step, Attempts: 1, Err: fmt.Errorf("reducer of field %q: %w", w.field.fieldName(), err)}
			}
			if collect {
				writes = append(writes, StepWrite{Node: node, Field: w.field.fieldName(), Value: w.value})
			}
		}
	}
	return st, writes, nil
}

func safe(fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	fn()
	return nil
}

// route computes the next step's tasks from the edges of the tasks just run
// (or their Goto/Sends), reading the new state: plain nodes in the order
// they were added to the builder, then Sends in the order they were made.
func (g *Graph[S]) route(ctx context.Context, r *run[S], tasks []*task[S], results []taskResult[S]) ([]*task[S], error) {
	var plain []int
	var sends []Send[S]
	add := func(from, to string) error {
		if to == END {
			return nil
		}
		spec := g.nodes[to]
		if spec == nil {
			return &InvalidUpdateError{Step: r.step, Nodes: []string{from}, Reason: fmt.Sprintf("route to unknown node %q", to)}
		}
		if !slices.Contains(plain, spec.index) {
			plain = append(plain, spec.index)
		}
		return nil
	}
	for i, t := range tasks {
		u := results[i].upd
		if u.routed {
			for _, to := range u.gotos {
				if err := add(t.Node, to); err != nil {
					return nil, err
				}
			}
			sends = append(sends, u.sends...)
			continue
		}
		for _, to := range g.edges[t.Node] {
			if err := add(t.Node, to); err != nil {
				return nil, err
			}
		}
		for _, rs := range g.routers[t.Node] {
			var to string
			var err error
			if perr := safe(func() { to, err = rs.route(ctx, r.state) }); perr != nil {
				err = perr
			}
			if err != nil {
				return nil, &NodeError{Node: t.Node, Task: t.ID, Step: r.step, Attempts: 1, Err: fmt.Errorf("router: %w", err)}
			}
			if len(rs.targets) > 0 && !slices.Contains(rs.targets, to) {
				return nil, &InvalidUpdateError{Step: r.step, Nodes: []string{t.Node}, Reason: fmt.Sprintf("router returned %q, not one of its targets %v", to, rs.targets)}
			}
			if err := add(t.Node, to); err != nil {
				return nil, err
			}
		}
		for _, fan := range g.fanouts[t.Node] {
			var ss []Send[S]
			var err error
			if perr := safe(func() { ss, err = fan(ctx, r.state) }); perr != nil {
				err = perr
			}
			if err != nil {
				return nil, &NodeError{Node: t.Node, Task: t.ID, Step: r.step, Attempts: 1, Err: fmt.Errorf("fan-out: %w", err)}
			}
			sends = append(sends, ss...)
		}
	}
	if len(plain) == 0 && len(sends) == 0 {
		return nil, nil
	}
	slices.Sort(plain)
	seq := r.seq + 1 // the checkpoint that will schedule these tasks
	next := make([]*task[S], 0, len(plain)+len(sends))
	for _, idx := range plain {
		name := g.order[idx]
		next = append(next, &task[S]{Task: Task{ID: g.taskID(r, seq, len(next)), Node: name}, spec: g.nodes[name]})
	}
	for _, s := range sends {
		spec := g.nodes[s.Node]
		if spec == nil {
			return nil, &InvalidUpdateError{Step: r.step, Reason: fmt.Sprintf("Send to unknown node %q", s.Node)}
		}
		arg := s.State
		next = append(next, &task[S]{Task: Task{ID: g.taskID(r, seq, len(next)), Node: s.Node, Send: true}, spec: spec, arg: &arg})
	}
	return next, nil
}

func (g *Graph[S]) taskID(r *run[S], seq uint64, i int) string {
	if g.cfg.saver == nil {
		return taskID(r.thread, uint64(r.step+1), i)
	}
	return taskID(r.thread, seq, i)
}

// save writes the run's state as the thread's new head.
func (g *Graph[S]) save(ctx context.Context, r *run[S], source string, writes []PendingWrite, ints []Interruption) error {
	if g.cfg.saver == nil {
		return nil
	}
	stb, err := codec.Marshal(r.state)
	if err != nil {
		return fmt.Errorf("graph: encode the state of thread %q: %w", r.thread, err)
	}
	cp := Checkpoint{
		Thread: r.thread, Seq: r.seq + 1, ID: FormatID(r.seq + 1), Parent: r.headID,
		Source: source, Step: r.step, Created: g.cfg.now(), State: stb,
		Writes: writes, Interrupts: ints,
	}
	if len(r.next) > 0 {
		cp.Next = make([]Task, len(r.next))
		for i, t := range r.next {
			tt := t.Task
			if t.Send && tt.Arg == nil {
				if tt.Arg, err = codec.Marshal(*t.arg); err != nil {
					return fmt.Errorf("graph: encode the Send input of node %q: %w", t.Node, err)
				}
				t.Arg = tt.Arg
			}
			cp.Next[i] = tt
		}
	}
	v, err := g.cfg.saver.Put(ctx, cp, r.version)
	if err != nil {
		return err
	}
	r.seq, r.headID, r.version, r.ckpt = cp.Seq, cp.ID, v, cp.ID
	return nil
}

// savePartial checkpoints a step that stopped early: same state and tasks,
// plus the completed tasks' writes and the interrupts.
func (g *Graph[S]) savePartial(ctx context.Context, r *run[S], tasks []*task[S], results []taskResult[S], ints []Interruption) error {
	if g.cfg.saver == nil {
		return nil
	}
	var writes []PendingWrite
	for i, t := range tasks {
		if results[i].err != nil {
			if t.resuming { // failed after getting its input: keep the input for Continue
				var sig *interruptSignal
				if !errors.As(results[i].err, &sig) {
					ints = append(ints, Interruption{Node: t.Node, Task: t.ID, Resume: t.resume})
				}
			}
			continue
		}
		w, err := g.encodeWrite(t, results[i].upd)
		if err != nil {
			return err
		}
		writes = append(writes, w)
		t.done, t.upd = true, results[i].upd
	}
	return g.save(ctx, r, SourcePartial, writes, ints)
}

func (g *Graph[S]) encodeWrite(t *task[S], u Update[S]) (PendingWrite, error) {
	w := PendingWrite{Task: t.ID, Node: t.Node, Routed: u.routed, Goto: u.gotos}
	var err error
	for _, f := range u.writes {
		if f.field == nil {
			return w, &InvalidUpdateError{Nodes: []string{t.Node}, Reason: "a zero Write; make writes with Field.Set"}
		}
		b, err := f.field.encode(f.value)
		if err != nil {
			return w, fmt.Errorf("graph: encode the write of node %q to field %q: %w", t.Node, f.field.fieldName(), err)
		}
		w.Fields = append(w.Fields, FieldValue{Field: f.field.fieldName(), Value: b})
	}
	if u.replace != nil {
		if w.Replace, err = codec.Marshal(*u.replace); err != nil {
			return w, fmt.Errorf("graph: encode the Replace of node %q: %w", t.Node, err)
		}
	}
	if u.merge != nil {
		if w.Merge, err = codec.Marshal(*u.merge); err != nil {
			return w, fmt.Errorf("graph: encode the Merge of node %q: %w", t.Node, err)
		}
	}
	for _, s := range u.sends {
		b, err := codec.Marshal(s.State)
		if err != nil {
			return w, fmt.Errorf("graph: encode a Send of node %q: %w", t.Node, err)
		}
		w.Sends = append(w.Sends, Task{Node: s.Node, Arg: b, Send: true})
	}
	return w, nil
}

func (g *Graph[S]) decodeWrite(w PendingWrite) (Update[S], error) {
	u := Update[S]{routed: w.Routed, gotos: w.Goto}
	for _, fv := range w.Fields {
		f := g.fields[fv.Field]
		if f == nil {
			return u, fmt.Errorf("%w: a pending write of node %q names field %q, which this graph does not declare", ErrInvalidGraph, w.Node, fv.Field)
		}
		v, err := f.decode(fv.Value)
		if err != nil {
			return u, err
		}
		u.writes = append(u.writes, Write[S]{field: f, value: v})
	}
	if len(w.Replace) > 0 {
		var s S
		if err := codec.Unmarshal(w.Replace, &s); err != nil {
			return u, fmt.Errorf("graph: decode the pending Replace of node %q: %w", w.Node, err)
		}
		u.replace = &s
	}
	if len(w.Merge) > 0 {
		var s S
		if err := codec.Unmarshal(w.Merge, &s); err != nil {
			return u, fmt.Errorf("graph: decode the pending Merge of node %q: %w", w.Node, err)
		}
		u.merge = &s
	}
	for _, t := range w.Sends {
		var s S
		if err := codec.Unmarshal(t.Arg, &s); err != nil {
			return u, fmt.Errorf("graph: decode a pending Send of node %q: %w", w.Node, err)
		}
		u.sends = append(u.sends, Send[S]{Node: t.Node, State: s})
	}
	return u, nil
}
