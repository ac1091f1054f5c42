// Package graph is a state-graph engine in the manner of LangGraph: typed
// state, nodes that return updates, reducers that merge them, super-steps
// that run ready nodes concurrently, conditional edges, Send fan-out,
// interrupts for outside input, per-node retries, streaming and
// checkpointing after every super-step. It does not depend on NATS; the
// JetStream KV checkpointer lives in graph/kvsaver and the adapter that
// hosts a graph as an effector in graph/effector.
//
// # Building a graph
//
// The state is a Go struct. Declare each field the nodes write, once, on the
// builder: a Plain field takes one write per super-step (two writes in one
// step fail it with an *InvalidUpdateError, like LangGraph's LastValue
// channel); a Reduced field merges every write with its Reducer (Append,
// Sum, MergeMap or your own), so parallel branches never lose writes.
//
//	type S struct {
//		Count int      `json:"count"`
//		Log   []string `json:"log"`
//	}
//	b := graph.New[S]()
//	count := graph.Plain(b, "count", func(s *S) *int { return &s.Count })
//	logs := graph.Reduced(b, "log", func(s *S) *[]string { return &s.Log }, graph.Append[string])
//	b.AddNode("inc", func(ctx context.Context, s S) (graph.Update[S], error) {
//		return graph.Updates(count.Set(s.Count+1), logs.Set([]string{"inc"})), nil
//	})
//	b.AddEdge(graph.START, "inc").AddEdge("inc", graph.END)
//	g, err := b.Compile(graph.WithCheckpointer(graph.NewMemorySaver(0)))
//
// A node returns an Update: field writes made by Field.Set (Updates, With),
// or Replace (the whole state, bypassing reducers) or Merge (through the
// whole-state reducer declared with Builder.StateReducer). Goto and
// WithSends route from inside the node (LangGraph's Command) instead of its
// edges. Nodes must treat the state they get as read-only (slices and maps
// in it are shared); reducers return new values.
//
// Edges: AddEdge (static; several out of one node fan out), AddConditionalEdges
// (a Router returns the next node or END), AddSends (a Fanout returns Sends:
// one run of a node per Send, each with its own input state). Routers and
// fan-outs read the state after the whole super-step is applied.
//
// # Super-steps
//
// A run proceeds in super-steps. The nodes triggered by the previous step
// run concurrently; when all are done their updates are applied in a
// deterministic order — plain nodes in the order they were added to the
// builder, then Send runs in the order of the Sends — never in completion
// order. A node triggered by several edges runs once per step.
//
// An invocation (Invoke, Resume, Continue) runs at most the recursion limit
// of super-steps (25 unless WithRecursionLimit), then fails with a
// *RecursionError naming the limit (errors.Is(err, ErrRecursionLimit)).
//
// # Threads and checkpoints
//
// With a Checkpointer (WithCheckpointer), every run belongs to a thread (an
// id of 1–128 letters, digits, - or _) and a Checkpoint is written after the
// input is applied and after every super-step: the state (msgpack), the next
// step's tasks, the step number. State, History and Fork read and branch a
// thread; UpdateState edits it from outside.
//
// When a node of a step fails (after its RetryPolicy), the step's
// checkpoint is written again with the successful siblings' writes
// (Checkpoint.Writes), the run returns a *NodeError, and Continue later runs
// only the failed node. Continue also finishes a run whose process died:
// tasks that may have run before see NodeInfo.Rerun, and NodeInfo.Task is a
// stable id to make side effects idempotent.
//
// One writer per thread: Checkpointer.Put is a compare-and-set on the
// thread's head, so of two concurrent runs of one thread one gets a
// *ConflictError (errors.Is(err, ErrConflict)) and history never forks
// silently. Checkpointers keep a bounded number of checkpoints per thread
// (a retention setting, DefaultRetention = 100), so storage does not grow
// with the square of the steps. Everything is typed msgpack (internal/codec):
// no self-describing objects are ever decoded.
//
// # Interrupts
//
// A node pauses the graph for outside input by returning Interrupt(value):
//
//	var answer Answer
//	ok, err := graph.ResumeInput(ctx, &answer)
//	if err != nil {
//		return graph.Update[S]{}, err
//	}
//	if !ok {
//		return graph.Update[S]{}, graph.Interrupt(Question{...})
//	}
//
// The run then returns a Result with Interrupted() true and Interrupts naming
// the node, its task id and the value (Interruption.Decode); the thread's
// checkpoint holds them (and the writes of the step's other nodes).
// Resume(ctx, thread, input) records the input in a checkpoint, then runs the
// interrupted node again from its start with NodeInfo.Resuming set and the
// input readable by ResumeInput (LangGraph's Command(resume=...)). Giving
// input twice is ErrAlreadyResumed; Continue finishes a resumed run that
// crashed.
//
// Several nodes of one step may wait at once (say one per remote worker):
// Resume(ctx, thread, input, ForTask(interruption.Task)) gives input to one
// of them; the others stay paused and are not run again, the resumed one's
// writes are kept, and the step completes when the last one is resumed.
// ResumeEach(ctx, thread, map[task]input) resumes several at once, each
// with its own input. Interruption.Task equals NodeInfo.Task in the run that
// paused and in the run that resumes.
//
// # Streaming
//
// Stream, StreamResume and StreamContinue return iter.Seq2[Event[S], error]
// yielding, after each super-step, the writes applied and the full state;
// a paused run ends with an Event carrying its Interrupts. The run stops
// when ctx ends (yielding the context error) or the loop breaks.
//
// # Errors
//
// Sentinels in errors.go, matched with errors.Is: ErrInvalidGraph,
// ErrInvalidArgument, ErrInvalidUpdate, ErrRecursionLimit, ErrConflict,
// ErrNotFound, ErrNoCheckpointer, ErrNothingToResume, ErrAlreadyResumed,
// ErrWaitingForInput, ErrTooLarge, ErrNodeFailed; typed errors
// *RecursionError, *ConflictError, *InvalidUpdateError, *NodeError (wraps
// the node's error; a panic becomes a *PanicError), *TooLargeError.
// Permanent marks a node error that its RetryPolicy must not retry.
//
// # API changes
//
// Additions since the first publication: Graph.Checkpointer, NodeInfo.Index,
// ForTask (a variadic ResumeOption on Resume and StreamResume: existing calls
// compile unchanged), Graph.ResumeEach. Continue now runs the runnable tasks of a step where
// some nodes still wait for input (ErrWaitingForInput only when all wait).
package graph
