package effector

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/codec"
)

// Record types and statuses of effectors made by InputKind.
const (
	// TypeResume is the type of a record that answers a waiting graph
	// effector; its payload is an Answer.
	TypeResume = "resume"
	// TypeInterrupt is the type of the record a graph effector emits on its
	// outbox for each question when it starts waiting; its payload is a
	// Question.
	TypeInterrupt = "interrupt"

	// StatusIdle: the graph is not waiting; any record runs it.
	StatusIdle = "IDLE"
	// StatusWaiting: the graph paused at interrupts; only a TypeResume
	// record runs it (it resumes where it paused).
	StatusWaiting = "WAITING"
)

// State is the state of an effector made by InputKind: the graph's state,
// and while the graph waits for input, what it waits for. It is what the
// effector's state document holds (field names as the json tags), so any
// client sees the status and the questions.
type State[S any] struct {
	Graph   S          `json:"graph"`
	Status  string     `json:"status"` // StatusIdle ("" before the first record) or StatusWaiting
	Waiting []Question `json:"waiting,omitempty"`
	// Checkpoint holds the paused graph's checkpoints (msgpack of a map
	// from thread to graph.Checkpoint: the graph's, thread "effector", and
	// its subgraphs'): the state, the pending tasks and the writes of the
	// paused step's other nodes. Empty while idle.
	Checkpoint []byte `json:"checkpoint,omitempty"`
}

// Question is one interrupt the graph waits on.
type Question struct {
	ID        string `json:"id"` // graph.Interruption.ID: answer it by this id
	Node      string `json:"node"`
	Namespace string `json:"ns,omitempty"` // set when the interrupt is inside a subgraph
	Value     any    `json:"value"`        // the value given to graph.Ask or graph.Interrupt
}

// Answer is the payload of a TypeResume record: Value answers the question
// ID, or every question the graph waits on when ID is empty. Value is
// decoded into the type the node's graph.Ask asks for.
type Answer struct {
	ID    string `json:"id,omitempty"`
	Value any    `json:"value"`
}

// InputKind is Kind for graphs that pause for human input: a graph.Ask (or
// graph.Interrupt) in a node leaves the effector waiting instead of failing
// the record. The effector's state is a State[S]:
//
//   - A record runs the graph from State.Graph. If a node asks, the graph's
//     checkpoint is kept in the state document with Status WAITING and the
//     questions (Waiting), records sent by the nodes that completed are
//     published, and a TypeInterrupt record per question goes to the
//     outbox.
//   - A TypeResume record (payload Answer) resumes the graph where it
//     paused: the asking node runs again from its start and its Ask gets
//     the answer; the other nodes of that step are not run again.
//   - While waiting, any other record is refused (dead letter at once,
//     ErrWaiting), and so is a resume while idle (ErrNotWaiting) or for an
//     unknown question (graph.ErrNothingToResume): a question is never
//     silently dropped.
//
// Each of these is one record's state transition, so it is crash-safe like
// any record: applied once, its outputs published once (section 6 of the
// design). The checkpoints kept in the state carry the handled record's
// time (EA-Time), not the clock's, so the state is a function of the
// record log and actor.Node.Replay rebuilds it exactly, waiting or not.
// k.Logic must be nil and g must have no checkpointer.
func InputKind[S any](k actor.Kind[State[S]], g *graph.Graph[S], opts ...Option) (actor.Kind[State[S]], error) {
	if g == nil {
		return k, fmt.Errorf("%w: nil graph for kind %q", ErrInvalid, k.Name)
	}
	if k.Logic != nil {
		return k, fmt.Errorf("%w: kind %q already has Logic; the graph is its logic", ErrInvalid, k.Name)
	}
	if g.Checkpointer() != nil {
		return k, fmt.Errorf("%w: kind %q: compile the graph without a checkpointer; the effector's state document holds its checkpoint", ErrInvalid, k.Name)
	}
	o, err := buildOptions(k.Name, opts)
	if err != nil {
		return k, err
	}
	k.Logic = func(actx *actor.Context, s State[S]) (State[S], error) {
		rc := &runCtx{actx: actx}
		ctx, lv, run := o.start(actx, context.WithValue(actx, runKey{}, rc))
		defer lv.close()
		sv := &docSaver{at: actx.Record().Time}
		use := append(run, graph.UsingCheckpointer(sv))
		var res graph.Result[S]
		var err error
		switch {
		case actx.Record().Type == TypeResume:
			if s.Status != StatusWaiting || len(s.Checkpoint) == 0 {
				return s, actor.Permanent(fmt.Errorf("%w: record %s", ErrNotWaiting, actx.Record().ID))
			}
			var a Answer
			if err := actx.Decode(&a); err != nil {
				return s, err
			}
			a.Value = wholeNumbers(a.Value)
			if err := sv.load(s.Checkpoint); err != nil {
				return s, actor.Permanent(err)
			}
			if a.ID != "" {
				use = append(use, graph.ForInterrupt(a.ID))
			}
			res, err = g.Resume(ctx, thread, a.Value, use...)
		case s.Status == StatusWaiting:
			return s, actor.Permanent(fmt.Errorf("%w: record %s of type %q; answer with a %q record first", ErrWaiting, actx.Record().ID, actx.Record().Type, TypeResume))
		default:
			res, err = g.Invoke(ctx, thread, graph.Replace(s.Graph), use...)
		}
		if err := lv.end(actx, err); err != nil {
			return s, classify(err)
		}
		if !res.Interrupted() {
			if err := rc.flush(); err != nil {
				return s, err
			}
			return State[S]{Graph: res.State, Status: StatusIdle}, nil
		}
		next := State[S]{Graph: res.State, Status: StatusWaiting}
		if next.Checkpoint, err = sv.encode(); err != nil {
			return s, actor.Permanent(err)
		}
		rc.dropInterrupted(res.Interrupts)
		if err := rc.flush(); err != nil {
			return s, err
		}
		for _, in := range res.Interrupts {
			q := Question{ID: in.ID, Node: in.Node, Namespace: in.Namespace}
			if err := in.Decode(&q.Value); err != nil {
				return s, actor.Permanent(err)
			}
			next.Waiting = append(next.Waiting, q)
			if err := actx.Emit(TypeInterrupt, q); err != nil {
				return s, err
			}
		}
		return next, nil
	}
	return k, nil
}

// thread is the graph thread of a hosted graph: each effector has its own
// checkpointer (its state document), so one name serves all.
const thread = "effector"

// dropInterrupted discards what the paused tasks sent: they run again
// from their start when resumed.
func (rc *runCtx) dropInterrupted(ints []graph.Interruption) {
	paused := map[string]bool{}
	for _, in := range ints {
		paused[in.Task] = true
		if task, _, ok := strings.Cut(in.ID, "#"); ok {
			paused[task] = true
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	kept := rc.outs[:0]
	for _, h := range rc.outs {
		if !paused[h.task] {
			kept = append(kept, h)
		}
	}
	rc.outs = kept
}

// docSaver is the checkpointer of one record's run of a hosted graph: it
// holds the head of each thread (the graph's, and its subgraphs'), loaded
// from and saved to the state document.
type docSaver struct {
	// at is the time of the record the run handles: the Created of the
	// checkpoints it saves, rather than the clock, so that the state
	// document is a function of the record log (actor.Node.Replay
	// rebuilds it exactly).
	at    time.Time
	mu    sync.Mutex
	heads map[string]graph.Checkpoint // by thread; Version is the thread's version
}

var _ graph.Checkpointer = (*docSaver)(nil)

func (d *docSaver) load(b []byte) error {
	var heads map[string]graph.Checkpoint
	if err := codec.Unmarshal(b, &heads); err != nil {
		return fmt.Errorf("graph effector: decode the paused graph's checkpoints: %w", err)
	}
	for th, cp := range heads {
		cp.Version = 1
		heads[th] = cp
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.heads = heads
	return nil
}

func (d *docSaver) encode() ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := codec.Marshal(d.heads)
	if err != nil {
		return nil, fmt.Errorf("graph effector: encode the paused graph's checkpoints: %w", err)
	}
	return b, nil
}

// Put implements graph.Checkpointer.
func (d *docSaver) Put(_ context.Context, cp graph.Checkpoint, head uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.heads == nil {
		d.heads = map[string]graph.Checkpoint{}
	}
	cur := d.heads[cp.Thread].Version
	if head != cur {
		return 0, &graph.ConflictError{Thread: cp.Thread, Detail: "the effector's run moved on"}
	}
	cp.Version = cur + 1
	cp.Created = d.at
	d.heads[cp.Thread] = cp
	return cp.Version, nil
}

// Get implements graph.Checkpointer.
func (d *docSaver) Get(_ context.Context, thread, id string) (graph.Checkpoint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cp, ok := d.heads[thread]
	if !ok || (id != "" && id != cp.ID) {
		return graph.Checkpoint{}, fmt.Errorf("%w: graph effector: checkpoint %q of thread %q", graph.ErrNotFound, id, thread)
	}
	return cp, nil
}

// List implements graph.Checkpointer.
func (d *docSaver) List(ctx context.Context, thread string, limit int) ([]graph.Checkpoint, error) {
	cp, err := d.Get(ctx, thread, "")
	if err != nil {
		return nil, nil
	}
	return []graph.Checkpoint{cp}, nil
}

// Delete implements graph.Checkpointer.
func (d *docSaver) Delete(_ context.Context, thread string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.heads, thread)
	return nil
}

// wholeNumbers turns the float64 of a JSON payload that hold whole numbers
// into int64 (in maps and lists too), so an answer sent as JSON decodes
// into the integer the node asks for (msgpack will not turn a float into
// an int; it does turn an int into a float).
func wholeNumbers(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x <= math.MaxInt64 {
			return int64(x)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = wholeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = wholeNumbers(e)
		}
	}
	return v
}
