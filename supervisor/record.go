package supervisor

import (
	"encoding/json"
	"time"

	"github.com/effectors/effectors/internal/codec"
)

// orchRecord is an orchestration's record in the orchestration bucket
// (<prefix>_orch), key <id>, msgpack with the module's codec: readable as a
// map from any language. Every change is a compare-and-set on the key's
// revision, so two supervisors never both advance one orchestration: the
// loser reads again and re-applies its event to the new record, where it
// usually no longer applies (the task it answers is no longer active).
type orchRecord struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Step is the graph node the orchestration is at (see Orchestration).
	Step string `json:"step"`
	// WaitingFor: "input", or the workers of the active tasks.
	WaitingFor string `json:"waiting_for,omitempty"`
	// Tasks are the task records out with workers, by the interrupt they
	// answer.
	Tasks []activeTask `json:"tasks,omitempty"`
	// Prompt is the payload of a pending input interrupt (JSON), if any.
	Prompt string `json:"prompt,omitempty"`
	// InputKey is the interrupt a pending input answers.
	InputKey string `json:"input_key,omitempty"`
	// Answers are results and input received for the requests the graph
	// paused on, kept until all of them are answered and the graph resumes.
	Answers []answer `json:"answers,omitempty"`
	// Input is the orchestration's original input, JSON text.
	Input string `json:"input,omitempty"`
	// Results is the definition's view of the graph state, JSON text.
	Results string `json:"results,omitempty"`
	// Error says why it FAILED.
	Error string `json:"error,omitempty"`
	// Checkpoint is the graph checkpoint to resume from (msgpack).
	Checkpoint []byte `json:"checkpoint,omitempty"`
	// Steps counts the advances applied (start, each result, input, cancel).
	Steps   int       `json:"steps"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Owner is the user or tenant the orchestration belongs to.
	Owner string `json:"owner,omitempty"`
}

// activeTask is a task record out with a worker.
type activeTask struct {
	Task
	// Key is the interrupt the task's result resumes.
	Key string `json:"key"`
	// Attempt is the step's attempt number.
	Attempt int `json:"attempt,omitempty"`
}

// DecodeOrchestration returns the public view of an orchestration, as
// <prefix>.orch.status answers it, from value, its record as the
// orchestration bucket (<prefix>_orch) holds it: for programs that watch
// the bucket (the gateway's orchestration subscriptions do). ErrInvalid
// when value is not an orchestration's record.
func DecodeOrchestration(value []byte) (Orchestration, error) {
	var r orchRecord
	if err := codec.Unmarshal(value, &r); err != nil {
		return Orchestration{}, invalidf("not an orchestration record: %v", err)
	}
	if r.ID == "" || r.Status == "" {
		return Orchestration{}, invalidf("not an orchestration record: no id or status")
	}
	return r.view(), nil
}

// view is the public JSON view of r. Input, Prompt and Results are JSON a
// supervisor wrote; text that is not JSON (a damaged record) is left out
// rather than making the view fail to encode.
func (r *orchRecord) view() Orchestration {
	o := Orchestration{
		ID: r.ID, Name: r.Name, Status: r.Status, Step: r.Step, WaitingFor: r.WaitingFor,
		Error: r.Error, Steps: r.Steps, Created: r.Created, Updated: r.Updated, Owner: r.Owner,
		Results: json.RawMessage("null"),
	}
	if r.Input != "" && json.Valid([]byte(r.Input)) {
		o.Input = json.RawMessage(r.Input)
	}
	if r.Prompt != "" && json.Valid([]byte(r.Prompt)) {
		o.Prompt = json.RawMessage(r.Prompt)
	}
	if r.Results != "" && json.Valid([]byte(r.Results)) {
		o.Results = json.RawMessage(r.Results)
	}
	for _, t := range r.Tasks {
		o.Tasks = append(o.Tasks, t.Task)
	}
	return o
}

// task returns the active task with record id id.
func (r *orchRecord) task(id string) (activeTask, bool) {
	for _, t := range r.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return activeTask{}, false
}
