package task

import (
	"context"
	"runtime/debug"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/records"
)

// Output is where a Func sends its partial output.
type Output struct {
	Text  func(chunk string)
	Event func(Event)
}

// Func is an Agent made of a function run on its own goroutine: returning nil
// reports Done, an error reports Fail (a panic a CodePanic error; an error
// after cancellation a CodeCancelled one). Cancel cancels its ctx, and the
// end is reported only once the function has returned.
type Func func(ctx context.Context, input string, start Start, out Output) error

type handle struct {
	session string
	cancel  context.CancelFunc
}

func (h *handle) Session() string { return h.session }
func (h *handle) Cancel()         { h.cancel() }

// Start implements Agent.
func (f Func) Start(ctx context.Context, input string, start Start, sinks Sinks) (Handle, error) {
	const op = "task.start"
	if f == nil {
		return nil, core.Errorf(core.CodeInvalid, op, "nil agent function")
	}
	if sinks.Done == nil || sinks.Fail == nil {
		return nil, core.Errorf(core.CodeInvalid, op, "sinks need Done and Fail")
	}
	if start.Session == "" {
		start.Session = records.NewID()
	}
	out := Output{Text: sinks.Text, Event: sinks.Event}
	if out.Text == nil {
		out.Text = func(string) {}
	}
	if out.Event == nil {
		out.Event = func(Event) {}
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = core.E(core.CodePanic, op, &core.PanicError{Value: p, Stack: debug.Stack()})
				}
			}()
			return f(runCtx, input, start, out)
		}()
		switch {
		case err == nil:
			sinks.Done()
		case runCtx.Err() != nil && core.CodeOf(err) != core.CodePanic && core.CodeOf(err) != core.CodeCancelled:
			sinks.Fail(core.E(core.CodeCancelled, "task.run", err))
		default:
			sinks.Fail(err)
		}
	}()
	return &handle{session: start.Session, cancel: cancel}, nil
}

// LLMAgent streams an LLM's answer to the input as the run's text.
type LLMAgent struct {
	// LLM to ask; nil for the one of the services in the run's context
	// (core.From), as for an agent hosted by a kind wrapped with core.Wrap.
	LLM core.LLM
	// System is the system prompt.
	System string
}

// Start implements Agent.
func (a LLMAgent) Start(ctx context.Context, input string, start Start, sinks Sinks) (Handle, error) {
	return Func(func(ctx context.Context, input string, _ Start, out Output) error {
		m := a.LLM
		if m == nil {
			scope, err := core.From(ctx)
			if err != nil {
				return err
			}
			m = scope
		}
		for chunk, err := range core.StreamText(ctx, m, core.Prompt(a.System, input)) {
			if err != nil {
				return err
			}
			out.Text(chunk)
		}
		return nil
	}).Start(ctx, input, start, sinks)
}

var (
	_ Agent = Func(nil)
	_ Agent = LLMAgent{}
)
