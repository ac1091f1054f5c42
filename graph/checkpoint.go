package graph

import (
	"context"
	"fmt"
	"time"

	"github.com/effectors/effectors/internal/codec"
)

// Checkpointer stores the checkpoints of threads. Implementations: MemorySaver
// here, the JetStream KV checkpointer in graph/kvsaver; every implementation
// passes graphtest.Run.
//
// Contract:
//   - Put stores cp as the new head of cp.Thread only if the thread's head is
//     still at version head (0: the thread must have no checkpoint yet), and
//     returns the new head's version. Otherwise it writes nothing and returns
//     a *ConflictError: one writer per thread, history never forks silently.
//     cp.Seq is one more than the previous head's Seq (1 for the first).
//   - Get returns checkpoint id of thread, or its head for id "", with
//     Version set to the version Put returned for it; ErrNotFound if absent.
//   - List returns a thread's checkpoints newest first, at most limit of them
//     (0: all kept); an unknown thread gives an empty list.
//   - Delete removes a thread and all its checkpoints.
//   - Implementations bound a thread's history with a retention setting
//     (oldest checkpoints dropped first), so storage grows with the state,
//     not with the square of the number of steps.
//   - Values are encoded as typed msgpack (internal/codec), never as
//     self-describing objects that run code or pick types when read.
//   - All methods are safe for concurrent use.
type Checkpointer interface {
	Put(ctx context.Context, cp Checkpoint, head uint64) (uint64, error)
	Get(ctx context.Context, thread, id string) (Checkpoint, error)
	List(ctx context.Context, thread string, limit int) ([]Checkpoint, error)
	Delete(ctx context.Context, thread string) error
}

// Checkpoint sources: why a checkpoint was written.
const (
	SourceInput   = "input"   // a run's input was applied
	SourceLoop    = "loop"    // a super-step completed
	SourcePartial = "partial" // a step stopped early: some tasks failed or interrupted; Writes keeps the others'
	SourceFork    = "fork"    // Graph.Fork copied an earlier checkpoint
	SourceUpdate  = "update"  // Graph.UpdateState wrote the state from outside
	SourceResume  = "resume"  // Graph.Resume recorded the input for the interrupts
)

// Checkpoint is everything needed to resume a thread: the state after Step
// super-steps, the tasks of the next step, the writes of those tasks that
// already completed and the interrupts that paused it. Values are msgpack.
type Checkpoint struct {
	Thread string `json:"thread"`
	ID     string `json:"id"`               // FormatID(Seq): sorts in thread order
	Seq    uint64 `json:"seq"`              // position in the thread: 1, 2, ...
	Parent string `json:"parent,omitempty"` // the checkpoint this one follows
	ForkOf string `json:"fork_of,omitempty"`
	Source string `json:"source"`
	// Step is LangGraph's checkpoint step: the super-steps of this branch of
	// the thread's history (0 after a new thread's input; UpdateState and
	// Fork take the edited checkpoint's + 1, so steps repeat after a fork).
	Step    int       `json:"step"`
	Created time.Time `json:"created"`

	State      []byte         `json:"state"`                // msgpack of S
	Next       []Task         `json:"next,omitempty"`       // tasks of the next step; none: the run reached END
	Writes     []PendingWrite `json:"writes,omitempty"`     // completed tasks of Next (SourcePartial)
	Interrupts []Interruption `json:"interrupts,omitempty"` // tasks of Next that paused
	Memos      []Memo         `json:"memos,omitempty"`      // recorded Once results of tasks of Next that failed

	// Version is the store's version of this checkpoint (set by Put and Get,
	// not stored); pass it to Put as head to write the next one.
	Version uint64 `json:"-"`
}

// FormatID is the checkpoint id of sequence number seq: zero-padded decimal,
// so ids sort like sequence numbers.
func FormatID(seq uint64) string { return fmt.Sprintf("%012d", seq) }

// Task is one node run scheduled for a step. Its ID is stable across retries,
// failures and resumes, so a node with side effects can use it as an
// idempotency key (e.g. a record id).
type Task struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	Arg  []byte `json:"arg,omitempty"` // msgpack of the Send's state; empty: the node reads the graph state
	Send bool   `json:"send,omitempty"`
}

// PendingWrite is the update of a completed task, kept in a checkpoint until
// its step completes.
type PendingWrite struct {
	Task    string       `json:"task"`
	Node    string       `json:"node"`
	Fields  []FieldValue `json:"fields,omitempty"`
	Replace []byte       `json:"replace,omitempty"`
	Merge   []byte       `json:"merge,omitempty"`
	// Output is the final state of a subgraph added with AddSubgraph
	// (msgpack of S): a write of every declared field, the other fields set.
	Output []byte   `json:"output,omitempty"`
	Routed bool     `json:"routed,omitempty"`
	Goto   []string `json:"goto,omitempty"`
	Sends  []Task   `json:"sends,omitempty"`
}

// Memo is what a task that failed had recorded in call order (the results
// of its Once calls and the inputs of its Ask calls, msgpack), replayed to
// those calls when it runs again.
type Memo struct {
	Task   string   `json:"task"`
	Values [][]byte `json:"values"`
}

// FieldValue is one field write: the field's name and its msgpack value.
type FieldValue struct {
	Field string `json:"field"`
	Value []byte `json:"value"`
}

// Interruption is a node's request for outside input (Ask, Interrupt):
// the graph paused in front of Node; Graph.Resume runs it again from its
// start with the input.
type Interruption struct {
	// ID names this interrupt in its thread: "<task>#<index>" for the
	// graph's own nodes, the subgraph's interrupt id for one that surfaced
	// from a subgraph. Resume one interrupt with ResumeEach or ForInterrupt.
	ID   string `json:"id,omitempty"`
	Node string `json:"node"`
	// Task is the id of the paused task: the NodeInfo.Task of the run that
	// interrupted and of the run that resumes it (ForTask, ResumeEach).
	Task string `json:"task"`
	// Index is the interrupt's place in the node's calls of Ask (0 for the
	// first): inputs are matched to calls by this order.
	Index int `json:"index,omitempty"`
	// Namespace is "" for the graph's own nodes; for an interrupt inside a
	// subgraph, the path to it: "<node>:<task>", joined with "|" when nested.
	Namespace string `json:"ns,omitempty"`
	Value     []byte `json:"value,omitempty"` // msgpack of the value given to Ask or Interrupt
	// Answers are the inputs of the task's earlier interrupts (Index of
	// them), replayed to its Ask calls in order when it runs again.
	Answers [][]byte `json:"answers,omitempty"`
	// Resume holds the input given to Graph.Resume, once given.
	Resume []byte `json:"resume,omitempty"`
}

// Decode decodes the interrupt's value into v (a pointer).
func (i Interruption) Decode(v any) error {
	if len(i.Value) == 0 {
		return nil
	}
	if err := codec.Unmarshal(i.Value, v); err != nil {
		return fmt.Errorf("graph: decode the value of the interrupt of node %q: %w", i.Node, err)
	}
	return nil
}
