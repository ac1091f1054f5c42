package kinds

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
)

// Task worker kinds: the workers the demo orchestration of package
// supervisor coordinates (phase 3 of the design documents).
//
// Both take a "task" record with payload [TaskInput] and answer on the
// record's EA-Reply (the supervisor's mailbox) with a "result" record
// ([TaskResult]) or, when the task asks to fail, an "error" record
// ([TaskError]); either keeps the task's EA-Process and has EA-Cause = the
// task record's id, which is how the supervisor matches it to its step.
//
//   - task-a: Output is Text in upper case.
//   - task-b: Output is Text with its words in reverse order.
//
// A task with "reject": true fails permanently and goes to dead letters.
//
// A "cancel" record (sent by the supervisor with EA-Priority high, so it
// overtakes waiting tasks) adds its EA-Process to the worker's cancelled
// list: later tasks of that process are skipped without a reply (a "skipped"
// record on the worker's outbox says so). A task already finished is not
// undone.
const (
	TaskAKind = "task-a"
	TaskBKind = "task-b"

	// MaxCancelled is how many cancelled process ids a worker remembers.
	MaxCancelled = 256
	// MaxTaskDelay bounds TaskInput.DelayMS.
	MaxTaskDelay = 10 * time.Second
)

// TaskInput is the payload of a "task" record.
type TaskInput struct {
	// Text is what the worker transforms.
	Text string `json:"text"`
	// Attempt is the supervisor's attempt number of this step, from 1.
	Attempt int `json:"attempt,omitempty"`
	// FailUntil makes the worker answer with an "error" record while Attempt
	// is below it: 0 never fails, a large value always fails. It lets tests
	// and demos show how an orchestration reacts to worker errors.
	FailUntil int `json:"fail_until,omitempty"`
	// DelayMS makes the worker take this long (at most MaxTaskDelay).
	DelayMS int `json:"delay_ms,omitempty"`
	// Reject makes the worker's logic fail with a permanent error: the task
	// goes to dead letters without an answer (a supervisor learns of it
	// from the dead letter).
	Reject bool `json:"reject,omitempty"`
}

// TaskResult is the payload of a "result" record.
type TaskResult struct {
	Worker  string `json:"worker"` // <kind>/<id> of the worker
	Output  string `json:"output"`
	Attempt int    `json:"attempt,omitempty"`
}

// TaskError is the payload of an "error" record.
type TaskError struct {
	Worker  string `json:"worker"`
	Error   string `json:"error"`
	Attempt int    `json:"attempt,omitempty"`
}

// TaskState is the state of a task worker.
type TaskState struct {
	// Done counts tasks answered with a result.
	Done int64 `json:"done"`
	// Failed counts tasks answered with an error.
	Failed int64 `json:"failed"`
	// Skipped counts tasks of cancelled processes.
	Skipped int64 `json:"skipped"`
	// Cancelled holds the latest cancelled process ids, oldest first.
	Cancelled []string `json:"cancelled,omitempty"`
}

// TaskA returns the task-a worker kind (upper-cases text).
func TaskA() actor.Kind[TaskState] {
	return actor.Kind[TaskState]{Name: TaskAKind, Logic: taskLogic(strings.ToUpper), Types: []string{"task", "cancel"}}
}

// TaskB returns the task-b worker kind (reverses the order of words).
func TaskB() actor.Kind[TaskState] {
	return actor.Kind[TaskState]{Name: TaskBKind, Logic: taskLogic(reverseWords), Types: []string{"task", "cancel"}}
}

func reverseWords(s string) string {
	w := strings.Fields(s)
	slices.Reverse(w)
	return strings.Join(w, " ")
}

func taskLogic(do func(string) string) actor.Logic[TaskState] {
	return func(ctx *actor.Context, s TaskState) (TaskState, error) {
		rec := ctx.Record()
		switch rec.Type {
		case "cancel":
			if rec.Process == "" {
				return s, actor.Permanent(fmt.Errorf("cancel: the record has no EA-Process: say which process to cancel"))
			}
			if !slices.Contains(s.Cancelled, rec.Process) {
				s.Cancelled = append(s.Cancelled, rec.Process)
				if n := len(s.Cancelled); n > MaxCancelled {
					s.Cancelled = slices.Clone(s.Cancelled[n-MaxCancelled:])
				}
			}
			return s, nil
		case "task":
		default:
			return s, actor.UnknownType(rec.Type)
		}
		var in TaskInput
		if err := ctx.Decode(&in); err != nil {
			return s, err
		}
		if rec.Reply == "" {
			return s, actor.Permanent(fmt.Errorf("task: the record has no EA-Reply: say where the result goes"))
		}
		if rec.Process != "" && slices.Contains(s.Cancelled, rec.Process) {
			s.Skipped++
			return s, ctx.Emit("skipped", map[string]string{"process": rec.Process, "task": rec.ID})
		}
		if in.Reject {
			return s, actor.Permanent(fmt.Errorf("task rejected on purpose (reject: true)"))
		}
		if in.DelayMS > 0 {
			d := min(time.Duration(in.DelayMS)*time.Millisecond, MaxTaskDelay)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return s, ctx.Err()
			}
		}
		self := ctx.Self().String()
		if in.Attempt < in.FailUntil {
			s.Failed++
			return s, ctx.Reply("error", TaskError{
				Worker: self, Attempt: in.Attempt,
				Error: fmt.Sprintf("%s failed attempt %d on purpose (fail_until %d)", self, in.Attempt, in.FailUntil),
			})
		}
		s.Done++
		return s, ctx.Reply("result", TaskResult{Worker: self, Output: do(in.Text), Attempt: in.Attempt})
	}
}
