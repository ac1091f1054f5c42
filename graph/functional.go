package graph

import "context"

// Workflow is a function run durably, LangGraph's functional API
// (@entrypoint): made by Entrypoint, it runs as a one-node graph, so it
// gets threads, checkpoints, interrupts (Ask), streaming and the
// checkpointers of graphs. Inside it, wrap each step whose result must not
// be recomputed in Once (LangGraph's @task): when the function runs again
// — resumed after an Ask, or continued after a failure — it starts from
// its beginning, and each Once returns the result recorded the first time.
type Workflow[I, O any] struct {
	g *Graph[flow[I, O]]
}

type flow[I, O any] struct {
	Input  I `json:"input"`
	Output O `json:"output"`
}

// WorkflowResult is the outcome of a Workflow run that ended without error:
// its Output, or the Interrupts it paused at.
type WorkflowResult[O any] struct {
	Output     O
	Interrupts []Interruption // non-empty: paused at Ask; call Resume
	Checkpoint string
}

// Interrupted reports whether the run paused at an Ask.
func (r WorkflowResult[O]) Interrupted() bool { return len(r.Interrupts) > 0 }

// Entrypoint makes fn a Workflow; opts are the graph's (WithCheckpointer
// for threads and Resume, WithRetry is not available: retry inside fn).
func Entrypoint[I, O any](fn func(ctx context.Context, in I) (O, error), opts ...Option) (*Workflow[I, O], error) {
	if fn == nil {
		return nil, invalidGraph("Entrypoint: nil function")
	}
	b := New[flow[I, O]]()
	out := Plain(b, "output", func(s *flow[I, O]) *O { return &s.Output })
	b.AddNode("entrypoint", func(ctx context.Context, s flow[I, O]) (Update[flow[I, O]], error) {
		o, err := fn(ctx, s.Input)
		if err != nil {
			return Update[flow[I, O]]{}, err
		}
		return Updates(out.Set(o)), nil
	})
	b.AddEdge(START, "entrypoint")
	g, err := b.Compile(opts...)
	if err != nil {
		return nil, err
	}
	return &Workflow[I, O]{g: g}, nil
}

func workflowResult[I, O any](res Result[flow[I, O]], err error) (WorkflowResult[O], error) {
	if err != nil {
		return WorkflowResult[O]{}, err
	}
	return WorkflowResult[O]{Output: res.State.Output, Interrupts: res.Interrupts, Checkpoint: res.Checkpoint}, nil
}

// Invoke runs the workflow on thread with input in.
func (w *Workflow[I, O]) Invoke(ctx context.Context, thread string, in I, opts ...RunOption) (WorkflowResult[O], error) {
	return workflowResult(w.g.Invoke(ctx, thread, Replace(flow[I, O]{Input: in}), opts...))
}

// Resume answers the Ask the workflow paused at (Graph.Resume).
func (w *Workflow[I, O]) Resume(ctx context.Context, thread string, answer any, opts ...ResumeOption) (WorkflowResult[O], error) {
	return workflowResult(w.g.Resume(ctx, thread, answer, opts...))
}

// Continue finishes a run that failed or whose process died
// (Graph.Continue): the function runs again, its Once calls returning the
// results recorded before.
func (w *Workflow[I, O]) Continue(ctx context.Context, thread string, opts ...RunOption) (WorkflowResult[O], error) {
	return workflowResult(w.g.Continue(ctx, thread, opts...))
}
