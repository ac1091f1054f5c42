package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// Result is what a worker answered to a task sent with Call: a "result"
// record, or an "error" record (or a result whose payload has a non-empty
// "error" field), which sets Err.
type Result struct {
	// Worker is the effector that answered, <kind>/<id>.
	Worker string
	// Attempt is the attempt number the task was sent with.
	Attempt int
	// Err is set when the worker answered with an error.
	Err *TaskError
	// Payload is the record's payload, encoded as ContentType says.
	Payload     []byte
	ContentType string
}

// Decode decodes the result's payload into v (a pointer).
func (r Result) Decode(v any) error {
	return records.Record{Payload: r.Payload, ContentType: r.ContentType}.Decode(v)
}

// CallOption adjusts a task sent by Call.
type CallOption func(*request) error

// Attempt numbers the task (default 1): a step that retries counts its
// attempts in its state and passes the count here; workers see it and the
// result carries it back.
func Attempt(n int) CallOption {
	return func(r *request) error {
		if n < 1 {
			return fmt.Errorf("attempt %d: must be at least 1", n)
		}
		r.Attempt = n
		return nil
	}
}

// MaxTimeout bounds Timeout.
const MaxTimeout = 7 * 24 * time.Hour

// Timeout gives the worker d to answer: if no answer has arrived d after the
// task was sent, the step gets an error answer "no answer within <d>"
// (Result.Err) to decide on, and a later answer is dropped. The timer is a
// durable timer in the timer stream (docs/timers.md), not a goroutine: it
// survives supervisor restarts; it fires with about a second's resolution.
func Timeout(d time.Duration) CallOption {
	return func(r *request) error {
		if d < time.Millisecond || d > MaxTimeout {
			return fmt.Errorf("timeout %s: must be from 1ms to %s", d, MaxTimeout)
		}
		r.TimeoutMS = d.Milliseconds()
		return nil
	}
}

// AsJSON encodes the task's payload as JSON instead of msgpack.
func AsJSON() CallOption {
	return func(r *request) error { r.JSON = true; return nil }
}

// Call is a remote step: called in a graph node of an orchestration, it
// sends a task record of type typ with payload to worker to and pauses the
// orchestration until the worker's answer arrives; the node then runs again
// from its start and Call returns the answer. While it waits nothing runs
// and nothing is held: the orchestration is its record in KV.
//
// The first time, Call returns an error the node must return as is (it is
// graph.Interrupt's). When the node runs again with the answer, Call
// returns it with a nil error; a worker's error is in Result.Err, for the
// node to decide: retry (route back to itself with the attempt count in the
// state), an alternative path (route elsewhere), or fail (return an error).
//
// The task record goes to <prefix>.mbox.<kind>.<id> with EA-Process = the
// orchestration id, EA-Reply = the orchestration's supervisor mailbox and an
// id derived from the graph task, so it is published once even if the
// supervisor crashes and the change is applied again. A node makes at most
// one Call (or AwaitInput); parallel tasks are parallel nodes.
func Call(ctx context.Context, to records.Ref, typ string, payload any, opts ...CallOption) (Result, error) {
	a, resumed, err := myAnswer(ctx)
	if err != nil {
		return Result{}, err
	}
	if resumed {
		if a.Kind == answerInput {
			return Result{}, fmt.Errorf("%w: step resumed with input where it waits for a task result: one Call or AwaitInput per node", ErrInvalid)
		}
		r := Result{Worker: a.Worker, Attempt: a.Attempt, Payload: a.Payload, ContentType: a.ContentType}
		var body struct {
			Error string `json:"error"`
		}
		_ = r.Decode(&body) // a payload without an error field, or not a map, is a plain result
		if a.Kind == answerError || body.Error != "" {
			msg := body.Error
			if msg == "" {
				msg = "the worker answered with an error record"
			}
			r.Err = &TaskError{Worker: a.Worker, Message: msg, Attempt: a.Attempt}
		}
		return r, nil
	}
	if err := to.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: call: worker: %v", ErrInvalid, err)
	}
	if typ == "" {
		typ = "task"
	}
	if err := (records.Record{ID: "x", Type: typ}).Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: call %s: record type: %v", ErrInvalid, to, err)
	}
	req := request{Kind: requestTask, To: to.String(), Type: typ, Attempt: 1}
	for _, o := range opts {
		if err := o(&req); err != nil {
			return Result{}, fmt.Errorf("%w: call %s: %v", ErrInvalid, to, err)
		}
	}
	if payload != nil {
		if req.JSON {
			req.Payload, err = json.Marshal(payload)
		} else {
			req.Payload, err = codec.Marshal(payload)
		}
		if err != nil {
			return Result{}, fmt.Errorf("%w: call %s: payload %T does not encode: %v", ErrInvalid, to, payload, err)
		}
	}
	return Result{}, graph.Interrupt(req)
}

// AwaitInput is an input step: called in a graph node, it pauses the
// orchestration with status WAITING until input arrives through
// ea.orch.input (Client.Input); the node then runs again from its start and
// AwaitInput decodes the input (JSON) into v and returns nil. prompt (any
// JSON value, may be nil) says what is asked; it is kept in the record.
//
// The first time it returns an error the node must return as is. Input
// that does not decode into v gives an *InputError: returned by the node,
// it makes ea.orch.input answer 400 and the orchestration keeps waiting.
func AwaitInput(ctx context.Context, prompt any, v any) error {
	a, resumed, err := myAnswer(ctx)
	if err != nil {
		return err
	}
	if resumed {
		if a.Kind != answerInput {
			return fmt.Errorf("%w: step resumed with a task result where it waits for input: one Call or AwaitInput per node", ErrInvalid)
		}
		if v == nil || len(a.Payload) == 0 {
			return nil
		}
		if err := json.Unmarshal(a.Payload, v); err != nil {
			return &InputError{Err: fmt.Errorf("input does not fit %T: %w", v, err)}
		}
		return nil
	}
	req := request{Kind: requestInput}
	if prompt != nil {
		b, err := json.Marshal(prompt)
		if err != nil {
			return fmt.Errorf("%w: await input: prompt %T does not encode as JSON: %v", ErrInvalid, prompt, err)
		}
		req.Prompt = string(b)
	}
	return graph.Interrupt(req)
}

// myAnswer returns the answer meant for the running node: the supervisor
// resumes each interrupt with its own answer (graph.Graph.ResumeEach).
func myAnswer(ctx context.Context) (answer, bool, error) {
	if _, ok := graph.Info(ctx); !ok {
		return answer{}, false, fmt.Errorf("%w: supervisor.Call and AwaitInput work only inside a node of an orchestration graph", ErrInvalid)
	}
	var a answer
	resumed, err := graph.ResumeInput(ctx, &a)
	if err != nil || !resumed {
		return answer{}, false, err
	}
	return a, true, nil
}
