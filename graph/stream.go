package graph

import (
	"context"
	"iter"
	"strings"
	"sync"
)

// StreamMode selects what a Stream method yields (WithStreamModes); modes
// combine with |.
type StreamMode uint8

const (
	// StreamValues: the full state after the input and after every step
	// (for StreamResume and StreamContinue: first the state they resume
	// from).
	StreamValues StreamMode = 1 << iota
	// StreamUpdates: one Event per task of a completed step, with its node,
	// task id and writes (Send runs of one node are told apart by Task).
	StreamUpdates
	// StreamCustom: what nodes write with WriteCustom, as they write it.
	StreamCustom
	// StreamMessages: what nodes write with WriteMessage (LLM tokens or
	// messages as they arrive), with the node and task that wrote them.
	StreamMessages
	// StreamTasks: a "task" Event when a task starts and a "task_result"
	// Event when it ends (Err: its error, ErrInterrupted for an interrupt).
	StreamTasks
	// StreamDebug: the task events of StreamTasks plus a "checkpoint" Event
	// after every checkpoint, in Mode StreamDebug.
	StreamDebug
	// StreamSubgraphs is not a mode but a flag (LangGraph's
	// stream(subgraphs=True)): subgraphs' runs yield the values, updates
	// and debug checkpoints of the other modes chosen too, with their
	// Namespace; as their state is of another type it is in Data (the
	// child's state for values and checkpoints, its []StepWrite for
	// updates), not in State. Custom, message and task events of
	// subgraphs' nodes are yielded with or without this flag.
	StreamSubgraphs
)

var modeNames = []string{"values", "updates", "custom", "messages", "tasks", "debug", "subgraphs"}

// String returns the LangGraph names of the modes, joined with "|".
func (m StreamMode) String() string {
	var names []string
	for i, n := range modeNames {
		if m&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "steps"
	}
	return strings.Join(names, "|")
}

// Event is what the Stream methods yield. Without WithStreamModes: one
// Event per super-step (Mode 0) with the tasks run (Nodes), the writes
// applied and the full state after them. With modes, each Event has the
// Mode it belongs to and the fields that mode fills (see StreamMode). In
// every case a run that pauses ends with an Event of Mode 0 whose
// Interrupts are set (and whose State is the state before the paused step).
type Event[S any] struct {
	Mode StreamMode
	// Namespace is "" for this graph's own tasks and "<node>:<task>" (joined
	// with "|" when nested) for parts from the nodes of a subgraph.
	Namespace  string
	Step       int
	Nodes      []string    // Mode 0: the step's tasks; StreamValues and debug checkpoints: the next step's
	Writes     []StepWrite // Mode 0: the step's writes; StreamUpdates: the task's
	State      S           // Mode 0, StreamValues, debug checkpoints
	Checkpoint string
	Interrupts []Interruption

	Node string // the node of an update, custom value, message or task event
	Task string // its task id
	Kind string // "task", "task_result" or "checkpoint" (StreamTasks, StreamDebug)
	Data any    // StreamCustom, StreamMessages: what the node wrote
	Err  error  // "task_result": the node's error, nil when it succeeded
	// Breakpoint is set on the last event (Mode 0) of a run that stopped at
	// a breakpoint (WithBreakpoints): the node.
	Breakpoint string
}

// part is an event that does not carry the state: custom values,
// messages, task events. Subgraph runs forward them to the parent's stream.
type part struct {
	mode       StreamMode
	kind       string
	ns         string
	node, task string
	step       int
	data       any
	err        error
}

// WriteCustom sends v to the run's stream in mode StreamCustom (LangGraph's
// get_stream_writer), at once, from inside a node. It does nothing when the
// run is not streamed in that mode or ctx is not a node's.
func WriteCustom(ctx context.Context, v any) { emitFrom(ctx, StreamCustom, v) }

// WriteMessage sends a message chunk (an LLM token, a message) to the run's
// stream in mode StreamMessages, with the node and task that wrote it. Call
// it for each token as it arrives from a streaming model.
func WriteMessage(ctx context.Context, chunk any) { emitFrom(ctx, StreamMessages, chunk) }

func emitFrom(ctx context.Context, m StreamMode, v any) {
	if nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx); ok {
		nc.emit(part{mode: m, data: v})
	}
}

// emitter hands the events of a streamed run to the consumer's goroutine,
// one at a time, waiting for the loop body to finish each (so breaking the
// loop stops the run after the step in progress).
type emitter[S any] struct {
	modes StreamMode
	up    func(part) // a subgraph's run: its events go to the parent's stream
	out   chan Event[S]
	ack   chan bool
	stop  chan struct{} // closed when the consumer is gone

	mu     sync.Mutex // one event at a time; guards closed
	closed bool
}

func (e *emitter[S]) wants(m StreamMode) bool { return e != nil && e.modes&m != 0 }

// collect reports whether apply must collect the writes of a step.
func (e *emitter[S]) collect() bool {
	return e != nil && (e.modes == 0 || e.modes&StreamUpdates != 0)
}

func (e *emitter[S]) alive() bool {
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.closed
}

func (e *emitter[S]) send(ev Event[S]) bool {
	if e == nil {
		return true
	}
	if e.up != nil {
		p := part{mode: ev.Mode, kind: ev.Kind, ns: ev.Namespace, node: ev.Node, task: ev.Task, step: ev.Step, data: any(ev.State)}
		if ev.Mode == StreamUpdates {
			p.data = ev.Writes
		}
		e.up(p)
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	select {
	case e.out <- ev:
	case <-e.stop:
		e.closed = true
		return false
	}
	if !<-e.ack {
		e.closed = true
	}
	return !e.closed
}

// values yields the state after the input (StreamValues).
func (e *emitter[S]) values(r *run[S], _ []StepWrite) bool {
	if !e.wants(StreamValues) {
		return e.alive()
	}
	return e.send(Event[S]{Mode: StreamValues, Namespace: r.ns, Step: r.step, State: r.state, Checkpoint: r.ckpt, Nodes: nodesOf(r.next)})
}

// step yields what the modes want of a completed step.
func (e *emitter[S]) step(r *run[S], tasks []*task[S], writes []StepWrite) bool {
	if e == nil {
		return true
	}
	if e.modes == 0 {
		return e.send(Event[S]{Step: r.step, Nodes: nodesOf(tasks), Writes: writes, State: r.state, Checkpoint: r.ckpt})
	}
	if e.wants(StreamUpdates) {
		for _, t := range tasks {
			var ws []StepWrite
			for _, w := range writes {
				if w.Task == t.ID {
					ws = append(ws, w)
				}
			}
			if !e.send(Event[S]{Mode: StreamUpdates, Namespace: r.ns, Step: r.step, Node: t.Node, Task: t.ID, Writes: ws, Checkpoint: r.ckpt}) {
				return false
			}
		}
	}
	if e.wants(StreamValues) {
		if !e.send(Event[S]{Mode: StreamValues, Namespace: r.ns, Step: r.step, State: r.state, Checkpoint: r.ckpt, Nodes: nodesOf(r.next)}) {
			return false
		}
	}
	return e.alive()
}

func (e *emitter[S]) debugCheckpoint(r *run[S], cp Checkpoint) {
	if !e.wants(StreamDebug) {
		return
	}
	var next []string
	for _, t := range cp.Next {
		next = append(next, t.Node)
	}
	if r.saver == nil {
		next = nodesOf(r.next)
	}
	e.send(Event[S]{Mode: StreamDebug, Kind: "checkpoint", Namespace: r.ns, Step: cp.Step, State: r.state, Checkpoint: cp.ID, Nodes: next, Interrupts: cp.Interrupts})
}

// part delivers a custom value, message or task event: to the parent run's
// stream for a subgraph run, else to this run's consumer.
func (r *run[S]) part(p part) {
	if r.fwd != nil {
		r.fwd(p)
		return
	}
	if r.obs != nil && r.obsModes&p.mode != 0 {
		r.obs(Part{Mode: p.mode, Namespace: p.ns, Step: p.step, Node: p.node, Task: p.task, Kind: p.kind, Data: p.data, Err: p.err})
	}
	e := r.em
	mode := p.mode
	if mode == StreamTasks && !e.wants(StreamTasks) {
		mode = StreamDebug
	}
	if !e.wants(mode) {
		return
	}
	e.send(Event[S]{Mode: mode, Namespace: p.ns, Step: p.step, Node: p.node, Task: p.task, Kind: p.kind, Data: p.data, Err: p.err})
}

func nodesOf[S any](tasks []*task[S]) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.Node
	}
	return out
}

// stream runs prepare then the loop on a goroutine of its own, yielding
// events on the consumer's goroutine.
func (g *Graph[S]) stream(ctx context.Context, thread string, o *runOpts, prepare func(*run[S]) error) iter.Seq2[Event[S], error] {
	return func(yield func(Event[S], error) bool) {
		release, err := g.claim(o, thread)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		defer release()
		r, err := g.newRun(ctx, o, thread)
		if err != nil {
			yield(Event[S]{}, err)
			return
		}
		em := &emitter[S]{modes: o.modes, out: make(chan Event[S]), ack: make(chan bool), stop: make(chan struct{})}
		r.em = em
		var res Result[S]
		var runErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			if runErr = prepare(r); runErr == nil {
				res, runErr = g.loop(ctx, r)
			}
			res, runErr = g.finish(ctx, r, res, runErr)
		}()
		stopped := false
	recv:
		for {
			select {
			case ev := <-em.out:
				ok := false
				if !stopped {
					ok = yield(ev, nil)
					stopped = !ok
				}
				em.ack <- ok
			case <-done:
				break recv
			}
		}
		close(em.stop) // a node's stray goroutine writing now gets nowhere
		if stopped {
			return
		}
		if runErr != nil {
			yield(Event[S]{}, runErr)
			return
		}
		if res.Paused() {
			yield(Event[S]{Step: res.Step, State: res.State, Checkpoint: res.Checkpoint, Interrupts: res.Interrupts, Breakpoint: res.Breakpoint}, nil)
		}
	}
}

// StreamText forwards each chunk of tokens (e.g. a streaming LLM call such
// as core/llm's Provider.Stream) to the run's stream with WriteMessage as
// it arrives, and returns the whole text: the usual body of a node that
// talks to a model. It stops at the first error, returning the text so far.
func StreamText(ctx context.Context, tokens iter.Seq2[string, error]) (string, error) {
	var b strings.Builder
	for tok, err := range tokens {
		if err != nil {
			return b.String(), err
		}
		WriteMessage(ctx, tok)
		b.WriteString(tok)
	}
	return b.String(), nil
}
