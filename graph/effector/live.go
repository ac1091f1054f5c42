package effector

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/graph"
)

// Record types of the live records a hosted graph publishes on its outbox
// while it runs (see the package doc, "Live runs"). Their payload is an
// Event.
const (
	// TypeMessage: a message chunk a node wrote with graph.WriteMessage or
	// graph.StreamText (an LLM token).
	TypeMessage = "graph.message"
	// TypeCustom: a value a node wrote with graph.WriteCustom.
	TypeCustom = "graph.custom"
	// TypeTask: a node started (Event.Event "task") or ended
	// ("task_result", with Event.Error when it failed).
	TypeTask = "graph.task"
)

// Event is the payload of a live record (TypeMessage, TypeCustom,
// TypeTask): what a node wrote, with the node that wrote it.
type Event struct {
	Node      string `json:"node"`
	Task      string `json:"task"` // the task id: parallel runs of one node are told apart by it
	Step      int    `json:"step"`
	Namespace string `json:"ns,omitempty"` // set for the nodes of a subgraph
	// Event is, for TypeTask, "task" (started) or "task_result" (ended).
	Event string `json:"event,omitempty"`
	// Data is what the node wrote (TypeMessage, TypeCustom).
	Data any `json:"data,omitempty"`
	// Error is, for a "task_result", the node's error.
	Error string `json:"error,omitempty"`
}

// Option configures Kind and InputKind.
type Option func(*options)

type options struct {
	live graph.StreamMode
}

// DefaultLive is what a hosted graph publishes live unless Live says
// otherwise: message chunks and custom values. Task events (progress) cost
// two publishes per node run; ask for them with Live.
const DefaultLive = graph.StreamMessages | graph.StreamCustom

// Live chooses what the hosted graph publishes on its outbox while it runs:
// any of graph.StreamMessages (TypeMessage), graph.StreamCustom
// (TypeCustom) and graph.StreamTasks (TypeTask); 0 publishes nothing live.
// Other modes are refused.
func Live(modes graph.StreamMode) Option {
	return func(o *options) { o.live = modes }
}

func buildOptions(kind string, opts []Option) (options, error) {
	o := options{live: DefaultLive}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	const allowed = graph.StreamMessages | graph.StreamCustom | graph.StreamTasks
	if o.live&^allowed != 0 {
		return o, fmt.Errorf("%w: kind %q: Live(%v): only %v can be published live", ErrInvalid, kind, o.live, allowed)
	}
	return o, nil
}

// live publishes the parts of one graph run on the effector's outbox as
// they come (actor.Context.EmitNow), one at a time, in the order the nodes
// wrote them. Once the run's context is done (the effector terminated, the
// process cancelled, the attempt timed out) it publishes nothing more; a
// publish that fails stops the run with the error.
type live struct {
	actx *actor.Context
	stop context.CancelCauseFunc

	mu  sync.Mutex // one publish at a time; guards err
	err error
}

// start returns the run's context and the option that publishes its parts
// live, or no option when nothing is published live.
func (o options) start(actx *actor.Context, ctx context.Context) (context.Context, *live, []graph.RunOption) {
	if o.live == 0 {
		return ctx, nil, nil
	}
	ctx, stop := context.WithCancelCause(ctx)
	l := &live{actx: actx, stop: stop}
	return ctx, l, []graph.RunOption{graph.Observe(o.live, l.publish)}
}

func (l *live) publish(p graph.Part) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.actx.Err() != nil {
		return
	}
	ev := Event{Node: p.Node, Task: p.Task, Step: p.Step, Namespace: p.Namespace}
	typ := TypeCustom
	switch p.Mode {
	case graph.StreamMessages:
		typ, ev.Data = TypeMessage, p.Data
	case graph.StreamCustom:
		ev.Data = p.Data
	case graph.StreamTasks:
		typ, ev.Event = TypeTask, p.Kind
		if p.Err != nil {
			ev.Error = p.Err.Error()
		}
	}
	if err := l.actx.EmitNow(typ, ev); err != nil {
		l.err = fmt.Errorf("publish live %s record of node %q: %w", typ, p.Node, err)
		if errors.Is(err, actor.ErrInvalid) {
			l.err = actor.Permanent(l.err) // a value that does not encode: retrying cannot fix it
		}
		l.stop(l.err)
	}
}

// close releases the run's context.
func (l *live) close() {
	if l != nil {
		l.stop(nil)
	}
}

// end is the run's outcome once the graph returned err: the live publish
// failure that stopped it, the cause of an interrupted run (its context
// ended: nothing of it is committed, even if the graph reached END), or
// err.
func (l *live) end(actx *actor.Context, err error) error {
	if l != nil {
		l.mu.Lock()
		lerr := l.err
		l.mu.Unlock()
		if lerr != nil {
			return lerr
		}
	}
	if actx.Err() != nil {
		cause := context.Cause(actx)
		if err != nil && !errors.Is(err, cause) {
			return fmt.Errorf("graph run interrupted: %w (%w)", cause, err)
		}
		return fmt.Errorf("graph run interrupted: %w", cause)
	}
	return err
}
