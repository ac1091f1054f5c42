// Package demo is the example orchestration ea-supervisor runs: a
// multi-step process coordinating the task effectors task-a and task-b
// (package examples/kinds, hosted by ea-node) with one step that waits for input. It
// shows a retry, an alternative path and a human in the loop; see
// [Definition].
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// Name is the name of the demo orchestration.
const Name = "demo"

// WorkerID is the id of the worker effectors the demo sends tasks to:
// task-a/demo and task-b/demo (created on first use; a node must host the
// kinds task-a and task-b, as ea-node does).
const WorkerID = "demo"

// MaxAttempts is how many times the demo tries task A before it takes
// the alternative path (task B does A's work).
const MaxAttempts = 3

// Input is the start input of the demo orchestration.
type Input struct {
	// Text is what the tasks work on. Required.
	Text string `json:"text"`
	// FailA makes task A fail while its attempt is below it (see
	// kinds.TaskInput.FailUntil): 2 shows a retry, MaxAttempts+1 or
	// more the alternative path.
	FailA int `json:"fail_a,omitempty"`
	// FailB makes task B fail the same way; B is not retried, so any value
	// above 1 fails the orchestration (and the alternative path too).
	FailB int `json:"fail_b,omitempty"`
}

// Note is the input the demo waits for.
type Note struct {
	Note string `json:"note"`
}

// State is the state of the demo orchestration's graph.
type State struct {
	Input    Input    `json:"input"`
	A        string   `json:"a,omitempty"`     // task A's output (or B's, on the alternative path)
	AVia     string   `json:"a_via,omitempty"` // the worker that produced A
	Attempts int      `json:"attempts"`        // attempts of task A
	Note     string   `json:"note,omitempty"`  // the input given
	B        string   `json:"b,omitempty"`     // task B's output
	Log      []string `json:"log,omitempty"`   // what happened, in order
}

// Results is what Status shows as the demo's results.
type Results struct {
	A        string   `json:"a"`
	AVia     string   `json:"a_via"`
	Note     string   `json:"note"`
	B        string   `json:"b"`
	Attempts int      `json:"attempts"`
	Log      []string `json:"log"`
}

// Definition returns the demo orchestration (phase 3 of the design documents): a
// multi-step process coordinating the task effectors A and B with one step
// that waits for input.
//
//	START → a ──(error, attempts left)──→ a (retry)
//	        │ └─(error, no attempts left)→ a_alt (task B does A's work) ─┐
//	        └─(result)──────────────────→ ask ←──────────────────────────┘
//	ask (WAITING for {"note": "..."}) → b → END
//
// Step a sends {"text"} to task-a/demo (upper case); ask waits for input
// {"note": "..."}; b sends "<a> <note>" to task-b/demo (words reversed).
// Results: {"a", "a_via", "note", "b", "attempts", "log"}. A failing task B
// fails the orchestration.
func Definition() (supervisor.Definition, error) {
	b := graph.New[State]()
	aF := graph.Plain(b, "a", func(s *State) *string { return &s.A })
	viaF := graph.Plain(b, "a_via", func(s *State) *string { return &s.AVia })
	attF := graph.Plain(b, "attempts", func(s *State) *int { return &s.Attempts })
	noteF := graph.Plain(b, "note", func(s *State) *string { return &s.Note })
	bF := graph.Plain(b, "b", func(s *State) *string { return &s.B })
	logF := graph.Reduced(b, "log", func(s *State) *[]string { return &s.Log }, graph.Append[string])
	graph.Plain(b, "input", func(s *State) *Input { return &s.Input })

	workerA := records.Ref{Kind: kinds.TaskAKind, ID: WorkerID}
	workerB := records.Ref{Kind: kinds.TaskBKind, ID: WorkerID}

	b.AddNode("a", func(ctx context.Context, s State) (graph.Update[State], error) {
		attempt := s.Attempts + 1
		res, err := supervisor.Call(ctx, workerA, "task", kinds.TaskInput{Text: s.Input.Text, Attempt: attempt, FailUntil: s.Input.FailA}, supervisor.Attempt(attempt))
		if err != nil {
			return graph.Update[State]{}, err
		}
		if res.Err != nil {
			up := graph.Updates(attF.Set(attempt), logF.Set([]string{fmt.Sprintf("a: attempt %d failed: %s", attempt, res.Err.Message)}))
			if attempt < MaxAttempts {
				return up.Goto("a"), nil // retry
			}
			return up.Goto("a_alt"), nil // alternative path
		}
		var out kinds.TaskResult
		if err := res.Decode(&out); err != nil {
			return graph.Update[State]{}, graph.Permanent(err)
		}
		return graph.Updates(aF.Set(out.Output), viaF.Set(out.Worker), attF.Set(attempt),
			logF.Set([]string{fmt.Sprintf("a: %q from %s (attempt %d)", out.Output, out.Worker, attempt)})).Goto("ask"), nil
	})
	b.AddNode("a_alt", func(ctx context.Context, s State) (graph.Update[State], error) {
		res, err := supervisor.Call(ctx, workerB, "task", kinds.TaskInput{Text: s.Input.Text, Attempt: 1, FailUntil: s.Input.FailB})
		if err != nil {
			return graph.Update[State]{}, err
		}
		if res.Err != nil {
			return graph.Update[State]{}, graph.Permanent(fmt.Errorf("task A failed %d times and the alternative failed too: %s", s.Attempts, res.Err.Message))
		}
		var out kinds.TaskResult
		if err := res.Decode(&out); err != nil {
			return graph.Update[State]{}, graph.Permanent(err)
		}
		return graph.Updates(aF.Set(out.Output), viaF.Set(out.Worker),
			logF.Set([]string{fmt.Sprintf("a_alt: %q from %s instead of task A", out.Output, out.Worker)})), nil
	})
	b.AddNode("ask", func(ctx context.Context, s State) (graph.Update[State], error) {
		var n Note
		prompt := map[string]string{"question": "a note to add to " + s.A, "want": `{"note": "..."}`}
		if err := supervisor.AwaitInput(ctx, prompt, &n); err != nil {
			return graph.Update[State]{}, err
		}
		return graph.Updates(noteF.Set(n.Note), logF.Set([]string{fmt.Sprintf("ask: note %q", n.Note)})), nil
	})
	b.AddNode("b", func(ctx context.Context, s State) (graph.Update[State], error) {
		text := strings.TrimSpace(s.A + " " + s.Note)
		res, err := supervisor.Call(ctx, workerB, "task", kinds.TaskInput{Text: text, Attempt: 1, FailUntil: s.Input.FailB})
		if err != nil {
			return graph.Update[State]{}, err
		}
		if res.Err != nil {
			return graph.Update[State]{}, graph.Permanent(fmt.Errorf("task B failed: %s", res.Err.Message))
		}
		var out kinds.TaskResult
		if err := res.Decode(&out); err != nil {
			return graph.Update[State]{}, graph.Permanent(err)
		}
		return graph.Updates(bF.Set(out.Output), logF.Set([]string{fmt.Sprintf("b: %q from %s", out.Output, out.Worker)})), nil
	})
	b.AddEdge(graph.START, "a").
		AddEdge("a", "ask"). // the default; the node routes itself with Goto
		AddEdge("a_alt", "ask").
		AddEdge("ask", "b").
		AddEdge("b", graph.END)

	return supervisor.Define(supervisor.Spec[State]{
		Name:    Name,
		Graph:   b,
		Workers: []records.Ref{workerA, workerB},
		Input: func(in json.RawMessage) (State, error) {
			var di Input
			dec := json.NewDecoder(strings.NewReader(string(in)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&di); err != nil {
				return State{}, fmt.Errorf("want {\"text\": \"...\"} (and optionally fail_a, fail_b): %v", err)
			}
			if strings.TrimSpace(di.Text) == "" {
				return State{}, fmt.Errorf("text is empty: want {\"text\": \"...\"}")
			}
			return State{Input: di}, nil
		},
		Results: func(s State) any {
			return Results{A: s.A, AVia: s.AVia, Note: s.Note, B: s.B, Attempts: s.Attempts, Log: s.Log}
		},
	})
}
