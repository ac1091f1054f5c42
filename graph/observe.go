package graph

// Part is what a node writes to its run while it runs, as Observe hands it
// over: a custom value (WriteCustom), a message chunk (WriteMessage,
// StreamText) or a task event (a task starting or ending).
type Part struct {
	// Mode is StreamCustom, StreamMessages or StreamTasks.
	Mode StreamMode
	// Namespace is "" for this graph's own tasks and "<node>:<task>"
	// (joined with "|" when nested) for the nodes of a subgraph.
	Namespace string
	Step      int
	Node      string
	Task      string
	// Kind is, for StreamTasks, "task" when the task starts and
	// "task_result" when it ends.
	Kind string
	// Data is what the node wrote (StreamCustom, StreamMessages).
	Data any
	// Err is, for a "task_result", the node's error (ErrInterrupted for
	// an interrupt); nil when it succeeded.
	Err error
}

// Observe calls fn with the parts of the modes chosen (StreamCustom,
// StreamMessages, StreamTasks; other modes are ignored) as the nodes write
// them, in any run: Invoke, Resume, ResumeEach, Continue and the Stream
// methods. It is how a caller that wants the run's result, not a stream of
// events, still sees tokens and progress as they happen (graph/effector
// publishes them live this way). Parts of subgraphs' nodes are included,
// with their Namespace.
//
// fn runs on the goroutine of the node that wrote the part, which waits
// for it: the parallel tasks of a step call it concurrently, so fn must be
// safe for concurrent use, and a slow fn slows the node down (which is the
// point when fn publishes: a node cannot run ahead of its readers).
func Observe(modes StreamMode, fn func(Part)) RunOption {
	return func(o *runOpts) {
		o.obs = fn
		o.obsModes = modes & (StreamCustom | StreamMessages | StreamTasks)
		if fn == nil || o.obsModes == 0 {
			o.obs, o.obsModes = nil, 0
		}
	}
}
