package supervisor

import (
	"encoding/json"
	"time"

	"github.com/effectors/effectors/internal/service"
)

// apiErrors maps the orchestration API's errors to codes and reasons
// (header EA-Error-Reason), for the supervisor answering and the [Client]
// reading the answer alike.
var apiErrors = service.Table{
	{Err: ErrInvalid, Code: CodeInvalid, Reason: "invalid"},
	{Err: ErrUnknownName, Code: CodeNotFound, Reason: "unknown_name"},
	{Err: ErrUnknownOrchestration, Code: CodeNotFound, Reason: "unknown_orchestration"},
	{Err: ErrConflict, Code: CodeConflict, Reason: "conflict"},
	{Err: ErrNotWaiting, Code: CodeConflict, Reason: "not_waiting"},
	{Err: ErrFinished, Code: CodeFinished, Reason: "finished"},
	{Err: ErrUnavailable, Code: CodeUnavailable, Reason: "unavailable"},
}

// Status is where an orchestration stands.
type Status string

// The statuses of an orchestration. COMPLETED, FAILED and CANCELLED are
// final.
const (
	StatusRunning   Status = "RUNNING"   // a step runs or a task is out with a worker
	StatusWaiting   Status = "WAITING"   // waiting for input (ea.orch.input)
	StatusCompleted Status = "COMPLETED" // reached the end; Results hold the outcome
	StatusFailed    Status = "FAILED"    // a step failed for good; Error says why
	StatusCancelled Status = "CANCELLED" // cancelled through ea.orch.cancel
)

// Final reports whether s is COMPLETED, FAILED or CANCELLED.
func (s Status) Final() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Operations of the orchestration API, the <op> of <prefix>.orch.<op>.
const (
	OpStart  = "start"
	OpStatus = "status"
	OpInput  = "input"
	OpCancel = "cancel"
)

// StartRequest is the JSON body of <prefix>.orch.start.
type StartRequest struct {
	Name string `json:"name"`
	// Input is the orchestration's input, any JSON value (null when absent).
	Input json.RawMessage `json:"input,omitempty"`
	// Owner is the user or tenant the orchestration belongs to (optional):
	// its task and status records carry it in EA-Owner.
	Owner string `json:"owner,omitempty"`
}

// StartReply is the JSON reply of <prefix>.orch.start.
type StartReply struct {
	ID string `json:"id"`
}

// IDRequest is the JSON body of <prefix>.orch.status and
// <prefix>.orch.cancel.
type IDRequest struct {
	ID string `json:"id"`
}

// InputRequest is the JSON body of <prefix>.orch.input.
type InputRequest struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
}

// OKReply is the JSON reply of <prefix>.orch.input and
// <prefix>.orch.cancel: the orchestration's status after the request.
type OKReply struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
}

// Orchestration is the JSON reply of <prefix>.orch.status: the public view
// of an orchestration's record.
type Orchestration struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Step is the graph node the orchestration is at: running, waiting in, or
	// (when final) the last one run.
	Step string `json:"step"`
	// WaitingFor says what it waits for: "input", or the worker effectors
	// (<kind>/<id>) whose results are outstanding; empty when nothing.
	WaitingFor string `json:"waiting_for"`
	// Input is the input it was started with (JSON).
	Input json.RawMessage `json:"input,omitempty"`
	// Prompt is what an input step asks for (JSON), while WAITING.
	Prompt json.RawMessage `json:"prompt,omitempty"`
	// Results are the orchestration's results so far (the definition's view
	// of its state) as JSON; final once COMPLETED.
	Results json.RawMessage `json:"results"`
	// Error says why it FAILED (empty otherwise).
	Error string `json:"error"`
	// Tasks are the tasks out with workers.
	Tasks   []Task    `json:"tasks,omitempty"`
	Steps   int       `json:"steps"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Owner is the user or tenant it belongs to (empty: none).
	Owner string `json:"owner,omitempty"`
}

// Task is a task record out with a worker, waiting for its result.
type Task struct {
	// ID is the task record's id; the result's EA-Cause.
	ID string `json:"id"`
	// Step is the graph node that sent it.
	Step string `json:"step"`
	// Worker is the effector it went to, <kind>/<id>.
	Worker string `json:"worker"`
	// Type is the task record's type.
	Type string    `json:"type"`
	Sent time.Time `json:"sent"`
}
