package graph

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/tracectx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Graph is a compiled graph of state S, safe for concurrent use: many
// threads can run at once (one run per thread at a time, see ConflictError).
type Graph[S any] struct {
	nodes   map[string]*nodeSpec[S]
	edges   map[string][]string
	routers map[string][]routerSpec[S]
	fanouts map[string][]Fanout[S]
	fields  map[string]fieldDef[S]
	// fieldList: the declared fields in declaration order.
	fieldList []fieldDef[S]
	stateRed  func(cur, upd S) S
	cfg       config

	mu      sync.Mutex      // guards running
	running map[string]bool // threads with a run in this process
}

// Checkpointer returns the checkpointer the graph was compiled with, nil
// without one.
func (g *Graph[S]) Checkpointer() Checkpointer { return g.cfg.saver }

// claim marks thread as running in this process; a second run gets a
// *ConflictError at once instead of at its first checkpoint. Runs with a
// checkpointer of their own (UsingCheckpointer) are not tracked: their
// caller keeps one writer per thread.
func (g *Graph[S]) claim(o *runOpts, thread string) (func(), error) {
	if o.saver != nil || o.own || g.cfg.saver == nil || thread == "" {
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
	Step       int            // the step of the thread's head checkpoint
	Interrupts []Interruption // non-empty: the run paused; call Graph.Resume
	Checkpoint string         // id of the thread's head ("" without a checkpointer)
	// Breakpoint names the node whose breakpoint (WithBreakpoints) paused
	// the run; Graph.Continue goes on.
	Breakpoint string
}

// Interrupted reports whether the run paused at an interrupt.
func (r Result[S]) Interrupted() bool { return len(r.Interrupts) > 0 }

// Paused reports whether the run stopped before END: at an interrupt or at
// a breakpoint.
func (r Result[S]) Paused() bool { return r.Interrupted() || r.Breakpoint != "" }

// StepWrite is one write applied in a step.
type StepWrite struct {
	Node  string
	Task  string // the task that wrote it ("" for the input)
	Field string // "" for Replace and Merge
	Value any
}

// Snapshot is a checkpoint with its state decoded.
type Snapshot[S any] struct {
	Checkpoint Checkpoint
	State      S
	Next       []string // nodes of the next step; empty: the thread reached END
	Interrupts []Interruption
	// Tasks are the tasks of the next step; for a subgraph node, Thread
	// names the child thread its checkpoints are in (see Graph.Subgraph).
	Tasks []TaskState
}

// TaskState is one task of a snapshot's next step.
type TaskState struct {
	ID     string
	Node   string
	Thread string // the subgraph's thread, for a node added with AddSubgraph or AddSubgraphFunc
}

// task is one node run of a step.
type task[S any] struct {
	Task
	spec  *nodeSpec[S]
	index int // position in its step
	arg   *S  // Send input
	val   any // Send payload for a node added with AddSendNode
	done  bool
	upd   Update[S]
	rerun bool
	ints  []Interruption // the task's interrupts in the checkpoint, answered or not
	memo  [][]byte       // what it recorded before it failed (Checkpoint.Memos)
}

// waiting reports a task paused at interrupts none of which got input: it
// is not run again until resumed.
func (t *task[S]) waiting() bool {
	if len(t.ints) == 0 {
		return false
	}
	for _, in := range t.ints {
		if len(in.Resume) > 0 {
			return false
		}
	}
	return true
}

func (t *task[S]) resuming() bool {
	for _, in := range t.ints {
		if len(in.Resume) > 0 {
			return true
		}
	}
	return false
}

// answers are the inputs of the task's own interrupts, in call order.
func (t *task[S]) answers() [][]byte {
	for _, in := range t.ints {
		if in.Namespace == "" && len(in.Resume) > 0 {
			return append(slices.Clone(in.Answers), in.Resume)
		}
	}
	return nil
}

// recorded is what the task's Ask and Once calls replay.
func (t *task[S]) recorded() [][]byte {
	a := t.answers()
	if len(t.memo) > len(a) {
		return t.memo
	}
	return a
}

// subAnswers are the inputs given to interrupts of a subgraph run by the
// task, by interrupt id.
func (t *task[S]) subAnswers() map[string][]byte {
	var m map[string][]byte
	for _, in := range t.ints {
		if in.Namespace != "" && len(in.Resume) > 0 {
			if m == nil {
				m = map[string][]byte{}
			}
			m[in.key()] = in.Resume
		}
	}
	return m
}

// interruptions turns a task's interrupt signal into the interruptions the
// checkpoint keeps.
func (t *task[S]) interruptions(sig *interruptSignal, answers [][]byte) []Interruption {
	if sig.sub != nil {
		out := make([]Interruption, 0, len(sig.sub))
		for _, in := range sig.sub {
			ns := t.Node + ":" + t.ID
			if in.Namespace != "" {
				ns += "|" + in.Namespace
			}
			out = append(out, Interruption{ID: in.key(), Node: t.Node, Task: t.ID, Index: in.Index, Namespace: ns, Value: in.Value})
		}
		return out
	}
	idx := sig.index
	if idx < 0 || idx > len(answers) {
		idx = len(answers)
	}
	in := Interruption{Node: t.Node, Task: t.ID, Index: idx, Value: sig.value}
	in.ID = in.key()
	if idx > 0 {
		in.Answers = slices.Clone(answers[:idx])
	}
	return []Interruption{in}
}

// errStillWaiting is the result of a task left paused; errHeld of a
// deferred task carried to the next step.
var (
	errStillWaiting = errors.New("graph: task still waits for input")
	errHeld         = errors.New("graph: deferred task held")
)

type taskResult[S any] struct {
	upd      Update[S]
	err      error
	attempts int
	values   [][]byte // what the task recorded, in call order (Ask inputs, Once results)
}

// run is the state of one invocation.
type run[S any] struct {
	thread   string
	saver    Checkpointer // nil: no checkpoints
	state    S
	step     int
	next     []*task[S]
	seq      uint64
	headID   string
	version  uint64
	ckpt     string
	em       *emitter[S] // nil: not streaming
	fwd      func(part)  // where a subgraph run sends its custom, messages and tasks parts
	obs      func(Part)  // Observe: called with the parts of obsModes
	obsModes StreamMode
	ns       string         // the run's namespace ("" at the top)
	store    Store          // what StoreOf returns in the run's nodes
	dirty    string         // DurabilityExit: the source of the checkpoint held back ("": none)
	pending  chan putResult // DurabilityAsync: the checkpoint being written
	flushing bool           // finish is writing the held-back checkpoint
	passed   bool           // Continue or Resume: the first step does not stop at its breakpoint
	memos    []Memo         // for the partial checkpoint being written
	held     int            // DurabilityExit: checkpoints held back since the last written
}

func (g *Graph[S]) saverOf(o *runOpts) Checkpointer {
	if o.saver != nil || o.own {
		return o.saver
	}
	return g.cfg.saver
}

func checkThread(sv Checkpointer, thread string) error {
	if sv == nil {
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

func needSaver(sv Checkpointer, thread string) error {
	if sv == nil {
		return ErrNoCheckpointer
	}
	return checkThread(sv, thread)
}

func (g *Graph[S]) snapshot(cp Checkpoint) (Snapshot[S], error) {
	s := Snapshot[S]{Checkpoint: cp, Interrupts: cp.Interrupts}
	if err := codec.Unmarshal(cp.State, &s.State); err != nil {
		return s, fmt.Errorf("graph: decode the state of checkpoint %s of thread %q: %w", cp.ID, cp.Thread, err)
	}
	for _, t := range cp.Next {
		s.Next = append(s.Next, t.Node)
		ts := TaskState{ID: t.ID, Node: t.Node}
		if spec := g.nodes[t.Node]; spec != nil && spec.sub {
			ts.Thread = SubgraphThread(t.ID)
		}
		s.Tasks = append(s.Tasks, ts)
	}
	return s, nil
}

func taskID(thread string, seq uint64, i int) string {
	return thread + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.Itoa(i)
}

// newRun returns an empty run of thread with o's checkpointer and stream.
func (g *Graph[S]) newRun(ctx context.Context, o *runOpts, thread string) (*run[S], error) {
	sv := g.saverOf(o)
	if err := checkThread(sv, thread); err != nil {
		return nil, err
	}
	r := &run[S]{thread: thread, saver: sv, store: g.cfg.store, obs: o.obs, obsModes: o.obsModes}
	if sp, ok := ctx.Value(subKey{}).(*subParent); ok && sp.child == any(g) {
		r.fwd, r.ns = sp.fwd, sp.ns
		if r.store == nil {
			r.store = sp.store
		}
		if sp.fwd != nil && sp.modes&StreamSubgraphs != 0 {
			r.em = &emitter[S]{modes: sp.modes, up: sp.fwd}
		}
	}
	return r, nil
}

// start applies input at START to the thread's head (a fresh state for a
// new thread) and checkpoints it. Its step is LangGraph's for the
// checkpoint after the input: 0 on a new thread, the head's step + 2 on a
// thread that has checkpoints (LangGraph writes the input, unapplied, at
// the head's step + 1; this engine does not write that checkpoint).
func (g *Graph[S]) start(ctx context.Context, r *run[S], input Update[S]) error {
	if r.saver != nil {
		head, err := r.saver.Get(ctx, r.thread, "")
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			if err := codec.Unmarshal(head.State, &r.state); err != nil {
				return fmt.Errorf("graph: decode the state of thread %q: %w", r.thread, err)
			}
			r.step, r.seq, r.headID, r.version = head.Step+2, head.Seq, head.ID, head.Version
		}
	}
	t := &task[S]{Task: Task{Node: START}}
	res := []taskResult[S]{{upd: input}}
	st, writes, err := g.apply(r.state, []*task[S]{t}, res, r.step, r.em.collect())
	if err != nil {
		return err
	}
	r.state = st
	next, err := g.route(ctx, r, []*task[S]{t}, res, r.step)
	if err != nil {
		return err
	}
	r.next = next
	if err := g.save(ctx, r, SourceInput, nil, nil); err != nil {
		return err
	}
	if !r.em.values(r, writes) {
		r.next = nil // the consumer stopped: run nothing
	}
	return nil
}

// load reads the thread's head into a run, with its pending writes and
// interrupts attached to the tasks.
func (g *Graph[S]) load(ctx context.Context, r *run[S]) (Checkpoint, error) {
	if err := needSaver(r.saver, r.thread); err != nil {
		return Checkpoint{}, err
	}
	head, err := r.saver.Get(ctx, r.thread, "")
	if err != nil {
		return head, err
	}
	r.step, r.seq, r.headID, r.version, r.ckpt = head.Step, head.Seq, head.ID, head.Version, head.ID
	if err := codec.Unmarshal(head.State, &r.state); err != nil {
		return head, fmt.Errorf("graph: decode the state of thread %q: %w", r.thread, err)
	}
	writes := map[string]PendingWrite{}
	for _, w := range head.Writes {
		writes[w.Task] = w
	}
	ints := map[string][]Interruption{}
	for _, in := range head.Interrupts {
		ints[in.Task] = append(ints[in.Task], in)
	}
	memos := map[string][][]byte{}
	for _, m := range head.Memos {
		memos[m.Task] = m.Values
	}
	for _, t := range head.Next {
		spec := g.nodes[t.Node]
		if spec == nil {
			return head, fmt.Errorf("%w: thread %q waits for node %q, which this graph does not have", ErrInvalidGraph, r.thread, t.Node)
		}
		tk := &task[S]{Task: t, spec: spec, rerun: true, ints: ints[t.ID], memo: memos[t.ID]}
		if t.Send {
			if err := g.decodeArg(tk); err != nil {
				return head, err
			}
		}
		if w, ok := writes[t.ID]; ok {
			u, err := g.decodeWrite(w)
			if err != nil {
				return head, err
			}
			tk.done, tk.upd = true, u
		}
		r.next = append(r.next, tk)
	}
	return head, nil
}

// resumeEach gives inputs[key] (key: an interrupt id or a task id) to the
// matching interrupts (and rest to all others when all is set), records
// them in a checkpoint, and prepares the run.
func (g *Graph[S]) resumeEach(ctx context.Context, r *run[S], inputs map[string][]byte, all bool, rest []byte) error {
	head, err := g.load(ctx, r)
	if err != nil {
		return err
	}
	if len(head.Interrupts) == 0 {
		return fmt.Errorf("%w: thread %q is not paused at an interrupt", ErrNothingToResume, r.thread)
	}
	found := map[string]bool{}
	for _, in := range head.Interrupts {
		found[in.Task], found[in.key()] = true, true
	}
	for key := range inputs {
		if !found[key] {
			return fmt.Errorf("%w: thread %q has no interrupt with id or task %q", ErrNothingToResume, r.thread, key)
		}
	}
	ints := make([]Interruption, len(head.Interrupts))
	given := 0
	for i, in := range head.Interrupts {
		ints[i] = in
		b, ok := inputs[in.key()]
		if !ok {
			b, ok = inputs[in.Task]
		}
		if !ok && all {
			b, ok = rest, true
		}
		if !ok {
			continue
		}
		if len(in.Resume) > 0 {
			if !all {
				return fmt.Errorf("%w: the interrupt %s of node %q of thread %q already got its input", ErrAlreadyResumed, in.key(), in.Node, r.thread)
			}
			continue
		}
		ints[i].Resume = b
		given++
	}
	if given == 0 {
		return fmt.Errorf("%w: thread %q already got input for its interrupts; call Continue to finish the run", ErrAlreadyResumed, r.thread)
	}
	for _, t := range r.next {
		t.ints = nil
		for _, in := range ints {
			if in.Task == t.ID {
				t.ints = append(t.ints, in)
			}
		}
	}
	// Record the input before running anything, keeping the pending writes.
	cp := head
	cp.Seq, cp.ID, cp.Parent, cp.ForkOf = head.Seq+1, FormatID(head.Seq+1), head.ID, ""
	cp.Source, cp.Created, cp.Interrupts = SourceResume, g.cfg.now(), ints
	v, err := r.saver.Put(ctx, cp, head.Version)
	if err != nil {
		return err
	}
	r.seq, r.headID, r.version, r.ckpt = cp.Seq, cp.ID, v, cp.ID
	r.passed = true
	r.em.debugCheckpoint(r, cp)
	r.resumed()
	return nil
}

// resumed yields the state a Resume or Continue starts from (StreamValues),
// as LangGraph's values stream does when it resumes a thread.
func (r *run[S]) resumed() {
	if !r.em.values(r, nil) {
		r.next = nil // the consumer stopped: run nothing
	}
}

func (g *Graph[S]) cont(ctx context.Context, r *run[S]) error {
	head, err := g.load(ctx, r)
	if err != nil {
		return err
	}
	r.passed = true
	if len(head.Next) == 0 {
		return fmt.Errorf("%w: thread %q reached END; Invoke starts a new run", ErrNothingToResume, r.thread)
	}
	runnable := len(head.Interrupts) == 0
	for _, t := range r.next {
		if !t.done && !t.waiting() {
			runnable = true
		}
	}
	if runnable {
		r.resumed()
		return nil
	}
	in := head.Interrupts[0]
	return fmt.Errorf("%w: node %q of thread %q is waiting; call Resume with its input", ErrWaitingForInput, in.Node, r.thread)
}

// loop runs super-steps until END, an interrupt, an error or the limit.
func (g *Graph[S]) loop(ctx context.Context, r *run[S]) (Result[S], error) {
	steps := 0
	for len(r.next) > 0 {
		if err := ctx.Err(); err != nil {
			return Result[S]{}, fmt.Errorf("graph: thread %q stopped before step %d: %w", r.thread, r.step+1, err)
		}
		if steps >= g.cfg.limit {
			return Result[S]{}, &RecursionError{Limit: g.cfg.limit}
		}
		if !r.passed && len(g.cfg.before) > 0 {
			for _, t := range r.next {
				if g.cfg.before[t.Node] && !t.done {
					return g.breakpoint(r, t.Node)
				}
			}
		}
		r.passed = false
		steps++
		stepNo := r.step + 1
		tasks := r.next
		results := g.runTasks(ctx, r, tasks, stepNo)

		var failed error
		var ints []Interruption
		for i, res := range results {
			t := tasks[i]
			if res.err == nil || res.err == errHeld {
				continue
			}
			if res.err == errStillWaiting {
				ints = append(ints, t.ints...)
				continue
			}
			var sig *interruptSignal
			if errors.As(res.err, &sig) && sig.err == nil {
				ints = append(ints, t.interruptions(sig, res.values)...)
				continue
			}
			if failed == nil {
				failed = &NodeError{Node: t.Node, Task: t.ID, Step: stepNo, Attempts: res.attempts, Err: res.err}
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

		st, writes, err := g.apply(r.state, tasks, results, stepNo, r.em.collect())
		if err != nil {
			return Result[S]{}, err
		}
		r.state = st
		next, err := g.route(ctx, r, tasks, results, stepNo)
		if err != nil {
			return Result[S]{}, err
		}
		r.step = stepNo
		r.next = next
		if err := g.save(ctx, r, SourceLoop, nil, nil); err != nil {
			return Result[S]{}, err
		}
		ran := tasks
		if slices.ContainsFunc(results, func(res taskResult[S]) bool { return res.err == errHeld }) {
			ran = nil
			for i, t := range tasks {
				if results[i].err != errHeld {
					ran = append(ran, t)
				}
			}
		}
		if !r.em.step(r, ran, writes) {
			break
		}
		if len(g.cfg.after) > 0 && len(r.next) > 0 {
			for _, t := range ran {
				if g.cfg.after[t.Node] {
					return g.breakpoint(r, t.Node)
				}
			}
		}
	}
	return Result[S]{State: r.state, Step: r.step, Checkpoint: r.ckpt}, nil
}

// breakpoint ends a run at the breakpoint of node.
func (g *Graph[S]) breakpoint(r *run[S], node string) (Result[S], error) {
	if r.saver == nil {
		return Result[S]{}, fmt.Errorf("%w: the breakpoint at node %q needs one to continue from", ErrNoCheckpointer, node)
	}
	return Result[S]{State: r.state, Step: r.step, Checkpoint: r.ckpt, Breakpoint: node}, nil
}

// runTasks runs the step's tasks not already done, concurrently when more
// than one, and returns their results in task order.
func (g *Graph[S]) runTasks(ctx context.Context, r *run[S], tasks []*task[S], step int) []taskResult[S] {
	results := make([]taskResult[S], len(tasks))
	hold := false // deferred tasks wait while anything else is scheduled
	for _, t := range tasks {
		if !t.spec.deferred || t.Send {
			hold = true
			break
		}
	}
	todo := 0
	for i, t := range tasks {
		t.index = i
		switch {
		case t.done:
			results[i] = taskResult[S]{upd: t.upd}
		case t.waiting():
			results[i] = taskResult[S]{err: errStillWaiting}
		case hold && t.spec.deferred && !t.Send:
			results[i] = taskResult[S]{err: errHeld}
		default:
			todo++
		}
	}
	if todo == 1 {
		for i, t := range tasks {
			if results[i].err == nil && !t.done {
				results[i] = g.runTask(ctx, r, t, step)
			}
		}
		return results
	}
	var wg sync.WaitGroup
	for i, t := range tasks {
		if results[i].err != nil || t.done {
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
		info:    NodeInfo{Thread: r.thread, Node: t.Node, Task: t.ID, Step: step, Index: t.index, Rerun: t.rerun, Resuming: t.resuming()},
		answers: t.recorded(),
		given:   t.answers(),
		sub:     t.subAnswers(),
		saver:   r.saver,
		store:   r.store,
		ns:      r.ns,
	}
	if r.em.wants(StreamCustom|StreamMessages|StreamTasks|StreamDebug|StreamSubgraphs) || r.fwd != nil || r.obs != nil {
		nc.sink = r.part
	}
	if r.em != nil {
		nc.modes = r.em.modes
	}
	nctx := context.WithValue(ctx, nodeCtxKey{}, nc)
	input := r.state
	if t.arg != nil {
		input = *t.arg
	}
	var key string
	if t.spec.cache != nil {
		var in any = input
		if t.spec.argFn != nil {
			in = t.val
		}
		var upd Update[S]
		var hit bool
		if key, upd, hit = g.cached(ctx, t, in); hit {
			return taskResult[S]{upd: upd}
		}
	}
	var span trace.Span
	if tr := tracectx.Tracer(ctx, "github.com/effectors/effectors/graph"); tr != nil {
		// Traced (a hosted graph's hop span is in ctx): a span per node.
		nctx, span = tr.Start(nctx, "graph node "+t.Node, trace.WithAttributes(
			attribute.String("graph.node", t.Node), attribute.Int("graph.step", step), attribute.String("graph.thread", r.thread)))
	}
	res := g.attempts(ctx, nctx, nc, t, input)
	tracectx.End(span, res.err)
	res.values = nc.values()
	if res.err == nil && res.upd.subIn != nil {
		res.upd = g.expand(res.upd)
	}
	if res.err == nil && key != "" {
		g.cache(ctx, t, key, res.upd)
	}
	return res
}

// attempts runs a task's node under its retry policy.
func (g *Graph[S]) attempts(ctx, nctx context.Context, nc *nodeCtx, t *task[S], input S) taskResult[S] {
	p := t.spec.retry
	nc.emit(part{mode: StreamTasks, kind: "task"})
	for attempt := 1; ; attempt++ {
		nc.info.Attempt = attempt
		nc.reset()
		var upd Update[S]
		var err error
		if t.spec.argFn != nil {
			upd, err = callArgNode(nctx, t.spec.argFn, t.val)
		} else {
			upd, err = callNode(nctx, t.spec.fn, input)
		}
		if err == nil || attempt >= max(p.Attempts, 1) || !retryable(p, err) {
			nc.emit(part{mode: StreamTasks, kind: "task_result", err: err})
			return taskResult[S]{upd: upd, err: err, attempts: attempt}
		}
		timer := time.NewTimer(p.Or(nodeRetry).Delay(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			err = errors.Join(err, ctx.Err())
			nc.emit(part{mode: StreamTasks, kind: "task_result", err: err})
			return taskResult[S]{err: err, attempts: attempt}
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

func callArgNode[S any](ctx context.Context, fn func(context.Context, any) (Update[S], error), v any) (upd Update[S], err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return fn(ctx, v)
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
		if res.upd.replace != nil || res.upd.merge != nil || res.upd.output != nil {
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
		if u.replace != nil || u.merge != nil || u.output != nil || len(u.writes) > 0 {
			wrote = node
		}
		if u.output != nil {
			if replaced != "" && replaced != node {
				return st, nil, &InvalidUpdateError{Step: step, Nodes: []string{replaced, node}, Reason: "Replace writes every field, so nothing else may write in the same step"}
			}
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
				writes = append(writes, StepWrite{Node: node, Task: tasks[i].ID, Value: *u.replace})
			}
		}
		if u.output != nil {
			// The fields the builder does not declare take the subgraph's
			// values; the declared ones are in u.writes (see expand).
			cur := st
			st = *u.output
			for _, f := range g.fieldList {
				f.copy(&st, &cur)
			}
		}
		if u.merge != nil {
			if err := safe(func() { st = g.stateRed(st, *u.merge) }); err != nil {
				return st, nil, &NodeError{Node: node, Task: tasks[i].ID, Step: step, Attempts: 1, Err: fmt.Errorf("state reducer: %w", err)}
			}
			if collect {
				writes = append(writes, StepWrite{Node: node, Task: tasks[i].ID, Value: *u.merge})
			}
		}
		for _, w := range u.writes {
			if err := safe(func() { w.field.apply(&st, w.value) }); err != nil {
				return st, nil, &NodeError{Node: node, Task: tasks[i].ID, Step: step, Attempts: 1, Err: fmt.Errorf("reducer of field %q: %w", w.field.fieldName(), err)}
			}
			if collect {
				writes = append(writes, StepWrite{Node: node, Task: tasks[i].ID, Field: w.field.fieldName(), Value: w.value})
			}
		}
	}
	return st, writes, nil
}

// expand turns the output of a subgraph added with AddSubgraph into writes
// of the declared fields, as LangGraph passes a subgraph's output through
// the parent's channels: each declared field is written with the output's
// value, except a plain field that is zero in both the subgraph's input
// and its output — a key without a value, which LangGraph leaves out of a
// subgraph's output. The fields not declared stay in u.output.
func (g *Graph[S]) expand(u Update[S]) Update[S] {
	in, out := u.subIn, u.output
	u.subIn = nil
	writes := make([]Write[S], 0, len(g.fieldList)+len(u.writes))
	for _, f := range g.fieldList {
		v := f.get(out)
		if !f.reduced() && isZero(v) && isZero(f.get(in)) {
			continue
		}
		writes = append(writes, Write[S]{field: f, value: v})
	}
	u.writes = append(writes, u.writes...)
	return u
}

func isZero(v any) bool { return v == nil || reflect.ValueOf(v).IsZero() }

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
// (or their Goto/Sends), reading the new state: plain nodes in the order of
// their names, then Sends in the order they were made (LangGraph's order:
// bench/langgraph/parity.mjs). Tasks are applied in this order.
func (g *Graph[S]) route(ctx context.Context, r *run[S], tasks []*task[S], results []taskResult[S], step int) ([]*task[S], error) {
	var plain []string
	var sends []Send[S]
	add := func(from, to string) error {
		if to == END {
			return nil
		}
		spec := g.nodes[to]
		if spec == nil {
			return &InvalidUpdateError{Step: step, Nodes: []string{from}, Reason: fmt.Sprintf("route to unknown node %q", to)}
		}
		if spec.argFn != nil {
			return &InvalidUpdateError{Step: step, Nodes: []string{from}, Reason: fmt.Sprintf("node %q takes a Send payload (AddSendNode); reach it with a Send", to)}
		}
		if !slices.Contains(plain, to) {
			plain = append(plain, to)
		}
		return nil
	}
	for i, t := range tasks {
		if results[i].err == errHeld { // not run: carried to the next step
			if err := add(t.Node, t.Node); err != nil {
				return nil, err
			}
			continue
		}
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
				return nil, &NodeError{Node: t.Node, Task: t.ID, Step: step, Attempts: 1, Err: fmt.Errorf("router: %w", err)}
			}
			if len(rs.targets) > 0 && !slices.Contains(rs.targets, to) {
				return nil, &InvalidUpdateError{Step: step, Nodes: []string{t.Node}, Reason: fmt.Sprintf("router returned %q, not one of its targets %v", to, rs.targets)}
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
				return nil, &NodeError{Node: t.Node, Task: t.ID, Step: step, Attempts: 1, Err: fmt.Errorf("fan-out: %w", err)}
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
	for _, name := range plain {
		next = append(next, &task[S]{Task: Task{ID: g.taskID(r, seq, step+1, len(next)), Node: name}, spec: g.nodes[name]})
	}
	for _, s := range sends {
		spec := g.nodes[s.Node]
		if spec == nil {
			return nil, &InvalidUpdateError{Step: step, Reason: fmt.Sprintf("Send to unknown node %q", s.Node)}
		}
		tk := &task[S]{Task: Task{ID: g.taskID(r, seq, step+1, len(next)), Node: s.Node, Send: true}, spec: spec}
		switch {
		case spec.argFn != nil:
			if !spec.accepts(s.Arg) {
				return nil, &InvalidUpdateError{Step: step, Reason: fmt.Sprintf("Send to node %q: payload %T is not the type the node takes (%s)", s.Node, s.Arg, spec.argType)}
			}
			tk.val = s.Arg
		case s.Arg != nil:
			return nil, &InvalidUpdateError{Step: step, Reason: fmt.Sprintf("Send to node %q with a payload %T: add the node with AddSendNode to take one", s.Node, s.Arg)}
		default:
			arg := s.State
			tk.arg = &arg
		}
		next = append(next, tk)
	}
	return next, nil
}

// taskID names task i of a step: by the checkpoint that schedules it
// (seq), by its step without a checkpointer, and by seq and the number of
// checkpoints held back since the last one written under DurabilityExit
// (so ids never repeat within a thread).
func (g *Graph[S]) taskID(r *run[S], seq uint64, step, i int) string {
	switch {
	case r.saver == nil:
		return taskID(r.thread, uint64(step), i)
	case r.held > 0:
		return r.thread + ":" + strconv.FormatUint(seq, 10) + "x" + strconv.Itoa(r.held) + ":" + strconv.Itoa(i)
	}
	return taskID(r.thread, seq, i)
}

// save writes the run's state as the thread's new head, now or later as
// the graph's Durability says.
func (g *Graph[S]) save(ctx context.Context, r *run[S], source string, writes []PendingWrite, ints []Interruption) error {
	if r.saver == nil {
		r.em.debugCheckpoint(r, Checkpoint{Source: source, Step: r.step, Writes: writes, Interrupts: ints})
		return nil
	}
	if err := r.wait(); err != nil {
		return err
	}
	mode := g.cfg.durability
	if r.flushing {
		mode = DurabilitySync
	}
	deferrable := source == SourceInput || source == SourceLoop
	if mode == DurabilityExit && deferrable {
		r.dirty = source
		r.held++
		return nil
	}
	r.dirty, r.held = "", 0
	stb, err := codec.Marshal(r.state)
	if err != nil {
		return fmt.Errorf("graph: encode the state of thread %q: %w", r.thread, err)
	}
	cp := Checkpoint{
		Thread: r.thread, Seq: r.seq + 1, ID: FormatID(r.seq + 1), Parent: r.headID,
		Source: source, Step: r.step, Created: g.cfg.now(), State: stb,
		Writes: writes, Interrupts: ints, Memos: r.memos,
	}
	if cp.Next, err = encodeNext(r.next); err != nil {
		return err
	}
	if mode == DurabilityAsync && deferrable {
		// Written while the next step runs; the next save (or the end of
		// the run) waits for it.
		done := make(chan putResult, 1)
		version := r.version
		go func() {
			v, err := r.saver.Put(ctx, cp, version)
			done <- putResult{v, err}
		}()
		r.pending = done
		r.seq, r.headID, r.ckpt = cp.Seq, cp.ID, cp.ID
		r.em.debugCheckpoint(r, cp)
		return nil
	}
	v, err := r.saver.Put(ctx, cp, r.version)
	if err != nil {
		return err
	}
	r.seq, r.headID, r.version, r.ckpt = cp.Seq, cp.ID, v, cp.ID
	r.em.debugCheckpoint(r, cp)
	return nil
}

type putResult struct {
	version uint64
	err     error
}

// wait waits for the checkpoint being written in the background, if any.
func (r *run[S]) wait() error {
	if r.pending == nil {
		return nil
	}
	res := <-r.pending
	r.pending = nil
	if res.err != nil {
		return res.err
	}
	r.version = res.version
	return nil
}

// finish ends a run: it waits for a checkpoint written in the background
// and writes the one an exit-durability run held back, even when ctx has
// ended (that is when it matters).
func (g *Graph[S]) finish(ctx context.Context, r *run[S], res Result[S], err error) (Result[S], error) {
	if werr := r.wait(); werr != nil {
		err = errors.Join(err, werr)
	}
	if r.dirty != "" && r.saver != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exitSaveTimeout)
		defer cancel()
		source := r.dirty
		r.dirty = ""
		if serr := g.saveNow(fctx, r, source); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err == nil {
		res.Checkpoint = r.ckpt
	}
	return res, err
}

// exitSaveTimeout bounds the checkpoint written at the end of a run whose
// context has ended.
const exitSaveTimeout = 10 * time.Second

func (g *Graph[S]) saveNow(ctx context.Context, r *run[S], source string) error {
	r.flushing = true
	defer func() { r.flushing = false }()
	return g.save(ctx, r, source, nil, nil)
}

// savePartial checkpoints a step that stopped early: same state and tasks,
// plus the completed tasks' writes and the interrupts.
func (g *Graph[S]) savePartial(ctx context.Context, r *run[S], tasks []*task[S], results []taskResult[S], ints []Interruption) error {
	var writes []PendingWrite
	var memos []Memo
	for i, t := range tasks {
		if err := results[i].err; err != nil {
			var sig *interruptSignal
			if err != errStillWaiting && err != errHeld && !errors.As(err, &sig) {
				if t.resuming() {
					// Failed after getting its input: keep the input for Continue.
					ints = append(ints, t.ints...)
				}
				if v := results[i].values; len(v) > len(t.answers()) {
					memos = append(memos, Memo{Task: t.ID, Values: v})
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
	r.memos = memos
	defer func() { r.memos = nil }()
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
	if u.output != nil {
		if w.Output, err = codec.Marshal(*u.output); err != nil {
			return w, fmt.Errorf("graph: encode the output of subgraph %q: %w", t.Node, err)
		}
	}
	for _, s := range u.sends {
		var v any = s.State
		if s.Arg != nil {
			v = s.Arg
		}
		b, err := codec.Marshal(v)
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
	if len(w.Output) > 0 {
		var s S
		if err := codec.Unmarshal(w.Output, &s); err != nil {
			return u, fmt.Errorf("graph: decode the pending output of subgraph %q: %w", w.Node, err)
		}
		u.output = &s
	}
	for _, t := range w.Sends {
		if spec := g.nodes[t.Node]; spec != nil && spec.argFn != nil {
			v, err := spec.decodeArg(t.Arg)
			if err != nil {
				return u, fmt.Errorf("graph: decode a pending Send of node %q: %w", w.Node, err)
			}
			u.sends = append(u.sends, Send[S]{Node: t.Node, Arg: v})
			continue
		}
		var s S
		if err := codec.Unmarshal(t.Arg, &s); err != nil {
			return u, fmt.Errorf("graph: decode a pending Send of node %q: %w", w.Node, err)
		}
		u.sends = append(u.sends, Send[S]{Node: t.Node, State: s})
	}
	return u, nil
}

// decodeArg decodes the Send input of a loaded task.
func (g *Graph[S]) decodeArg(t *task[S]) error {
	if t.spec.argFn != nil {
		v, err := t.spec.decodeArg(t.Arg)
		if err != nil {
			return fmt.Errorf("graph: decode the Send payload of task %s: %w", t.ID, err)
		}
		t.val = v
		return nil
	}
	var a S
	if err := codec.Unmarshal(t.Arg, &a); err != nil {
		return fmt.Errorf("graph: decode the Send input of task %s: %w", t.ID, err)
	}
	t.arg = &a
	return nil
}

// encodeNext is the checkpoint form of a step's tasks.
func encodeNext[S any](next []*task[S]) ([]Task, error) {
	if len(next) == 0 {
		return nil, nil
	}
	out := make([]Task, len(next))
	for i, t := range next {
		tt := t.Task
		if t.Send && tt.Arg == nil {
			var v any = t.val
			if t.arg != nil {
				v = *t.arg
			}
			var err error
			if tt.Arg, err = codec.Marshal(v); err != nil {
				return nil, fmt.Errorf("graph: encode the Send input of node %q: %w", t.Node, err)
			}
			t.Arg = tt.Arg
		}
		out[i] = tt
	}
	return out, nil
}
