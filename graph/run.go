package graph

import (
	"context"
	"iter"

	"github.com/effectors/effectors/internal/codec"
)

// RunOption configures one run (Invoke, Resume, ResumeEach, Continue and
// their Stream forms).
type RunOption func(*runOpts)

// ResumeOption is the RunOption of Resume (kept as a name for the
// options that narrow what Resume gives its input to).
type ResumeOption = RunOption

type runOpts struct {
	task  string       // ForTask
	saver Checkpointer // UsingCheckpointer
	own   bool         // use saver even when nil (a subgraph of a graph without one)
	modes StreamMode   // WithStreamModes
	// Observe
	obs      func(Part)
	obsModes StreamMode
}

func runOptions(opts []RunOption) *runOpts {
	o := &runOpts{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o
}

// ForTask makes Resume give its input only to the interrupts of one task
// (an Interruption.Task) or to one interrupt (an Interruption.ID), for steps
// where several wait at once (e.g. one per remote worker): the others stay
// paused, and the step completes when the last of them is resumed.
func ForTask(idOrTask string) ResumeOption { return func(o *runOpts) { o.task = idOrTask } }

// ForInterrupt is ForTask: it names the interrupt by its Interruption.ID.
func ForInterrupt(id string) ResumeOption { return ForTask(id) }

// UsingCheckpointer runs with cp instead of the checkpointer the graph was
// compiled with (a graph compiled without one gets threads, interrupts and
// Resume for this run). The caller keeps one writer per thread of cp: such
// runs are not checked against each other in this process.
func UsingCheckpointer(cp Checkpointer) RunOption { return func(o *runOpts) { o.saver = cp } }

// WithStreamModes selects what the Stream methods yield (several modes at
// once: StreamValues|StreamUpdates); without it they yield one Event per
// super-step (Mode 0). Invoke, Resume and Continue ignore it.
func WithStreamModes(modes ...StreamMode) RunOption {
	return func(o *runOpts) {
		for _, m := range modes {
			o.modes |= m
		}
	}
}

// Invoke runs the graph on thread with input applied at START (through the
// reducers, like a node's update), until END or an interrupt. With a
// checkpointer, a thread that has checkpoints continues from its latest
// state: input is merged into it and the run starts again at START (pending
// tasks of an unfinished run are dropped; use Continue or Resume to finish
// them). Without a checkpointer thread may be "".
func (g *Graph[S]) Invoke(ctx context.Context, thread string, input Update[S], opts ...RunOption) (Result[S], error) {
	return g.exec(ctx, thread, runOptions(opts), func(r *run[S]) error { return g.start(ctx, r, input) })
}

// Resume gives input to the interrupts the thread is paused at and runs on:
// each interrupted node runs again from its start; its Ask calls return the
// inputs in call order (the last one this input) and ResumeInput reads
// this input. Nodes of that step that had completed are not run again. The
// input is checkpointed before anything runs, so a crash after Resume
// returns is finished by Continue. With ForTask only that task's (or that
// interrupt's) interrupt gets the input. Errors: ErrNothingToResume (no
// interrupt pending, or none of that task), ErrAlreadyResumed (input
// already given).
func (g *Graph[S]) Resume(ctx context.Context, thread string, input any, opts ...ResumeOption) (Result[S], error) {
	o := runOptions(opts)
	return g.exec(ctx, thread, o, func(r *run[S]) error { return g.resume(ctx, r, o, input) })
}

// ResumeEach gives each interrupt its own input: inputs maps an
// Interruption.ID (or an Interruption.Task: all interrupts of that task) to
// its input (LangGraph's Command(resume={id: value})). Interrupts without an
// entry stay paused and their nodes are not run again; the step completes
// when the last of them is resumed. Errors as Resume; a key with no pending
// interrupt is ErrNothingToResume, one that already got input
// ErrAlreadyResumed.
func (g *Graph[S]) ResumeEach(ctx context.Context, thread string, inputs map[string]any, opts ...RunOption) (Result[S], error) {
	if len(inputs) == 0 {
		return Result[S]{}, invalidArg("ResumeEach: no inputs; map interrupt ids to their inputs")
	}
	raw, err := encodeInputs(inputs)
	if err != nil {
		return Result[S]{}, err
	}
	return g.exec(ctx, thread, runOptions(opts), func(r *run[S]) error { return g.resumeEach(ctx, r, raw, false, nil) })
}

// Continue finishes a thread's unfinished run from its latest checkpoint:
// after a node failure, a recursion limit, a cancelled context or a crash.
// Tasks whose writes the checkpoint holds are not run again; the others run
// with NodeInfo.Rerun set. ErrNothingToResume if the thread reached END,
// ErrWaitingForInput if it is paused at an interrupt (use Resume).
func (g *Graph[S]) Continue(ctx context.Context, thread string, opts ...RunOption) (Result[S], error) {
	return g.exec(ctx, thread, runOptions(opts), func(r *run[S]) error { return g.cont(ctx, r) })
}

// Stream is Invoke yielding Events: one per super-step, or the parts of
// the modes chosen with WithStreamModes. It stops with an error when ctx
// ends, and when the loop breaks (the run then stops after the step in
// progress, which is checkpointed). A paused run ends with an Event (Mode
// 0) carrying its Interrupts.
func (g *Graph[S]) Stream(ctx context.Context, thread string, input Update[S], opts ...RunOption) iter.Seq2[Event[S], error] {
	return g.stream(ctx, thread, runOptions(opts), func(r *run[S]) error { return g.start(ctx, r, input) })
}

// StreamResume is Resume yielding Events like Stream; in StreamValues the
// first is the state it resumes from (as LangGraph's values stream).
func (g *Graph[S]) StreamResume(ctx context.Context, thread string, input any, opts ...ResumeOption) iter.Seq2[Event[S], error] {
	o := runOptions(opts)
	return g.stream(ctx, thread, o, func(r *run[S]) error { return g.resume(ctx, r, o, input) })
}

// StreamContinue is Continue yielding Events like Stream; in StreamValues
// the first is the state it continues from.
func (g *Graph[S]) StreamContinue(ctx context.Context, thread string, opts ...RunOption) iter.Seq2[Event[S], error] {
	return g.stream(ctx, thread, runOptions(opts), func(r *run[S]) error { return g.cont(ctx, r) })
}

func encodeInputs(inputs map[string]any) (map[string][]byte, error) {
	raw := make(map[string][]byte, len(inputs))
	for k, v := range inputs {
		b, err := codec.Marshal(v)
		if err != nil {
			return nil, invalidArg("resume: encode the input %T for %q: %v", v, k, err)
		}
		raw[k] = b
	}
	return raw, nil
}

func (g *Graph[S]) resume(ctx context.Context, r *run[S], o *runOpts, input any) error {
	b, err := codec.Marshal(input)
	if err != nil {
		return invalidArg("Resume: encode the input %T: %v", input, err)
	}
	if o.task != "" {
		return g.resumeEach(ctx, r, map[string][]byte{o.task: b}, false, nil)
	}
	return g.resumeEach(ctx, r, nil, true, b)
}

// exec runs prepare then the loop, one run of thread at a time.
func (g *Graph[S]) exec(ctx context.Context, thread string, o *runOpts, prepare func(*run[S]) error) (Result[S], error) {
	release, err := g.claim(o, thread)
	if err != nil {
		return Result[S]{}, err
	}
	defer release()
	r, err := g.newRun(ctx, o, thread)
	if err != nil {
		return Result[S]{}, err
	}
	if err := prepare(r); err != nil {
		_, err = g.finish(ctx, r, Result[S]{}, err)
		return Result[S]{}, err
	}
	res, err := g.loop(ctx, r)
	return g.finish(ctx, r, res, err)
}
