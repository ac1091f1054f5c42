package supervisor

import (
	"context"
	"encoding/json"
)

// engine runs one orchestration definition: it starts a run from its input
// and resumes it from a checkpoint with answers to the requests it paused
// on. Neither call keeps anything running after it returns: between calls
// an orchestration is nothing but its record in KV.
type engine interface {
	// start runs orchestration id from input until it pauses or ends.
	start(ctx context.Context, id string, input json.RawMessage) (outcome, error)
	// resume continues orchestration id from checkpoint with an answer for
	// every pending request.
	resume(ctx context.Context, id string, checkpoint []byte, answers []answer) (outcome, error)
}

// outcome is where a run stopped. An error returned beside it (by start or
// resume) is a failure of the supervisor (storage, encoding) to retry; a
// step that failed for good is outcome.failed.
type outcome struct {
	checkpoint []byte
	step       string          // node paused in, or last run
	results    json.RawMessage // the definition's view of the state
	done       bool            // reached END
	failed     error           // a step failed for good
	waits      []wait          // what it paused on (neither done nor failed)
}

// wait is one request the run paused on: a task for a worker or a request
// for input.
type wait struct {
	key  string // the interrupt it answers (stable: the graph task id)
	step string
	req  request
}

// request is the value a remote step or an input step pauses with
// (msgpack in the checkpoint).
type request struct {
	// Kind is "task" or "input".
	Kind string `json:"kind"`
	// Task fields.
	To      string `json:"to,omitempty"` // worker <kind>/<id>
	Type    string `json:"type,omitempty"`
	Payload []byte `json:"payload,omitempty"` // msgpack
	JSON    bool   `json:"json,omitempty"`    // payload is JSON
	Attempt int    `json:"attempt,omitempty"`
	// TimeoutMS, when set, makes the task an error answer ("no answer
	// within ...") if no answer arrived that many milliseconds after it was
	// sent.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Input fields: what the step asks for, JSON text.
	Prompt string `json:"prompt,omitempty"`
}

const (
	requestTask  = "task"
	requestInput = "input"
)

// answer resolves one wait: a worker's result or error record, or input.
type answer struct {
	Key string `json:"key"`
	// Kind is "result", "error" or "input".
	Kind   string `json:"kind"`
	Worker string `json:"worker,omitempty"`
	// Payload is the record's payload (ContentType says how it is encoded)
	// or the input as JSON.
	Payload     []byte `json:"payload,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Attempt     int    `json:"attempt,omitempty"`
}

const (
	answerResult = "result"
	answerError  = "error"
	answerInput  = "input"
)
