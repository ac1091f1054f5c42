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
// builder, in one line with FieldOf (by json tag or Go name): without a
// reducer it is plain, taking one write per super-step (two writes in one
// step fail it with an *InvalidUpdateError, like LangGraph's LastValue
// channel); with a Reducer (Append, Sum, MergeMap or your own) every write
// is merged, so parallel branches never lose writes. Plain and Reduced do
// the same with an accessor function.
//
//	type S struct {
//		Count int      `json:"count"`
//		Log   []string `json:"log"`
//	}
//	b := graph.New[S]()
//	count := graph.FieldOf[int](b, "count")
//	logs := graph.FieldOf[[]string](b, "log", graph.Append[string])
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
// one run of a node per Send, each with its own input state; a node added
// with AddSendNode takes a payload of its own type, SendArg). Routers and
// fan-outs read the state after the whole super-step is applied.
//
// Node options: WithRetry (a RetryPolicy), Defer (run once nothing else is
// left: the join of branches of unequal length), WithCachePolicy (reuse the
// update for an input seen before, kept in the graph's Cache).
//
// # Super-steps
//
// A run proceeds in super-steps. The nodes triggered by the previous step
// run concurrently; when all are done their updates are applied in a
// deterministic order — plain nodes in the order of their names (as
// LangGraph does, whatever the order they were added in), then Send runs in
// the order of the Sends — never in completion order. A node triggered by
// several edges runs once per step.
//
// An invocation (Invoke, Resume, Continue) runs at most the recursion limit
// of super-steps (25 unless WithRecursionLimit), then fails with a
// *RecursionError naming the limit (errors.Is(err, ErrRecursionLimit)).
// Only node steps count (LangGraph also counts the input step).
//
// # Threads and checkpoints
//
// With a Checkpointer (WithCheckpointer, or UsingCheckpointer for one run),
// every run belongs to a thread (an id of 1–128 letters, digits, - or _)
// and a Checkpoint is written after the input is applied and after every
// super-step: the state (msgpack), the next step's tasks, the step number.
// Steps are LangGraph's checkpoint step: 0 for the input of a new thread,
// one more per super-step, the head's step + 2 for a later input (LangGraph
// also writes the unapplied input, at + 1), the edited checkpoint's + 1 for
// UpdateState and Fork — so after a fork a thread's steps repeat (Seq
// orders its checkpoints). The checkpoints that amend a step in progress,
// partial and resume, keep its number.
// WithDurability writes them synchronously (default), while the next step
// runs (DurabilityAsync) or only when a run ends (DurabilityExit).
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
// # Time travel
//
// State and History read a thread; Fork copies a checkpoint as the head of
// a thread. UpdateState edits a thread from outside as if a node had
// written the update: AsNode(name) computes the next step from that node's
// edges (LangGraph's as_node), At(id) edits an earlier checkpoint and makes
// the result the head in one call, and a Goto or Sends in the update become
// the next step (a Goto to an unknown node is an *InvalidUpdateError and
// writes nothing). WithBreakpoints pauses runs before or after given
// nodes (Result.Breakpoint); Continue goes on.
//
// # Interrupts
//
// A node pauses the graph for outside input with Ask (LangGraph's
// interrupt):
//
//	answer, err := graph.Ask[Answer](ctx, Question{...})
//	if err != nil {
//		return graph.Update[S]{}, err
//	}
//
// The run then returns a Result with Interrupted() true and Interrupts
// naming the node, its task id, the interrupt's ID and Index and the value
// (Interruption.Decode); the thread's checkpoint holds them (and the writes
// of the step's other nodes). Resume(ctx, thread, input) records the input
// in a checkpoint, then runs the interrupted node again from its start with
// NodeInfo.Resuming set, where Ask returns the input. A node may Ask several
// times: inputs are matched to Ask calls by call order, each unanswered Ask
// pausing the graph again. Giving input twice is ErrAlreadyResumed; Continue
// finishes a resumed run that crashed. Interrupt and ResumeInput are the
// older error form of Ask.
//
// Several interrupts may wait at once (say one node per remote worker):
// Resume(ctx, thread, input, ForInterrupt(id)) (or ForTask) gives input to
// one of them, ResumeEach(ctx, thread, map[id]input) to several, each with
// its own input (LangGraph's Command(resume={id: value})); the others stay
// paused and are not run again, and the step completes when the last one is
// resumed. Interruption.Task equals NodeInfo.Task in the run that paused and
// in the run that resumes.
//
// # Subgraphs
//
// AddSubgraph and AddSubgraphFunc add a compiled graph as a node. A
// subgraph of the same state type (AddSubgraph) returns its final state as
// the node's update, through the parent's reducers as LangGraph does (a
// list with Append gets the child's whole list, the items it started with
// included); AddSubgraphFunc maps the state in and out. With a
// checkpointer the child runs in its parent's checkpointer on the thread
// SubgraphThread(task) (its checkpoint namespace, listed in Snapshot.Tasks),
// so its state and history are reachable from the parent; its interrupts
// surface as the parent's (with a Namespace) and resume through it; a crash
// inside it is finished by the parent's Continue, which continues the
// child's thread.
//
// # Streaming
//
// Stream, StreamResume and StreamContinue return iter.Seq2[Event[S], error].
// Without options they yield, after each super-step, the writes applied and
// the full state. WithStreamModes selects LangGraph's stream modes, several
// at once: StreamValues, StreamUpdates (per task, with its id),
// StreamCustom (WriteCustom), StreamMessages (WriteMessage, StreamText for
// a model's tokens), StreamTasks and StreamDebug, plus the StreamSubgraphs
// flag for the values and updates of subgraphs. A paused run ends with an
// Event carrying its Interrupts. The run stops when ctx ends (yielding the
// context error) or the loop breaks (after the step in progress).
//
// Observe hands the custom values, message chunks and task events of any
// run (Invoke and Resume too) to a function as the nodes write them: the
// way to show tokens and progress while still getting the run's Result
// (graph/effector publishes them on the effector's outbox this way).
//
// # Functional API
//
// Entrypoint runs a plain function as a durable Workflow (a one-node
// graph); Once inside it records a step's result so that a run after an
// Ask or a failure does not repeat it (LangGraph's @entrypoint and @task).
//
// # Long-term memory
//
// WithStore gives nodes a Store (StoreOf): items under namespaces, shared
// across threads, listed by namespace prefix and, with an Embedder,
// searched by meaning. MemoryStore here, a JetStream KV store in
// graph/kvsaver.
//
// # Errors
//
// Sentinels in errors.go, matched with errors.Is: ErrInvalidGraph,
// ErrInvalidArgument, ErrInvalidUpdate, ErrRecursionLimit, ErrConflict,
// ErrNotFound, ErrNoCheckpointer, ErrNothingToResume, ErrAlreadyResumed,
// ErrWaitingForInput, ErrInterrupted, ErrNotSupported, ErrTooLarge,
// ErrNodeFailed; typed errors
// *RecursionError, *ConflictError, *InvalidUpdateError, *NodeError (wraps
// the node's error; a panic becomes a *PanicError), *TooLargeError.
// Permanent marks a node error that its RetryPolicy must not retry; it is
// retry.Permanent, the mark actor.Permanent makes too, and RetryPolicy is
// retry.Policy, the one policy type of every package.
//
// # API changes
//
// Additions since the first publication: Observe and Part, Graph.Checkpointer, NodeInfo.Index,
// ForTask (a variadic ResumeOption on Resume and StreamResume: existing calls
// compile unchanged), Graph.ResumeEach. Continue now runs the runnable tasks of a step where
// some nodes still wait for input (ErrWaitingForInput only when all wait).
//
// LangGraph parity (all compatible with existing callers): Ask, FieldOf,
// Interruption.ID/Index/Namespace/Answers, ForInterrupt, RunOption
// (ResumeOption is now an alias of it) on Invoke, Resume, ResumeEach,
// Continue and the Stream methods (UsingCheckpointer, WithStreamModes),
// Event's mode fields, StepWrite.Task, Snapshot.Tasks, UpdateOption on
// UpdateState (AsNode, At), RunOption on State and History, Send.Arg,
// SendArg, AddSendNode, AddSubgraph, AddSubgraphFunc, SubgraphThread, Defer,
// WithCachePolicy, Cache, WithCache, MemoryCache, WithDurability, Store,
// WithStore, StoreOf, MemoryStore, WriteCustom, WriteMessage, StreamText, WithBreakpoints, Result.Breakpoint,
// Result.Paused, Event.Breakpoint, StreamSubgraphs, Entrypoint, Workflow,
// WorkflowResult, Once, Checkpoint.Memos, Memo.
// Behaviour changes: a second invocation of a thread (and UpdateState, a
// Fork onto an existing thread) takes the next step number instead of
// repeating the head's; an InvalidUpdateError of a route names the step
// that ran; ResumeInput returns the latest input of a node asked several
// times. Checked against LangGraph.js 1.7.3 (bench/langgraph/parity.mjs):
// a step's writes are applied in the order of node names, not of AddNode
// calls; AddSubgraph passes the child's final state through the parent's
// reducers instead of replacing the parent's; a second invocation's input
// checkpoint takes the head's step + 2, UpdateState and Fork the edited
// checkpoint's step + 1; StreamResume and StreamContinue in StreamValues
// yield the state they resume from first.
package graph
