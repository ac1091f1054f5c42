package task

import (
	"context"
	"encoding/json"
	"runtime/debug"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/records"
)

// Output is where a Func sends its partial output, and how it asks for
// tool-call approvals (nil when its host cannot answer them).
type Output struct {
	Text  func(chunk string)
	Event func(Event)
	Ask   core.Asker
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
	out := Output{Text: sinks.Text, Event: sinks.Event, Ask: sinks.Ask}
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

// LLMAgent streams an LLM's answer to the input as the run's text, then
// reports its token usage (an EventUsage event).
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
		for d, err := range m.Stream(ctx, core.Prompt(a.System, input)) {
			if err != nil {
				return err
			}
			if d.Final != nil {
				out.Event(UsageEvent(d.Final.Usage))
				continue
			}
			out.Text(d.Text)
		}
		return nil
	}).Start(ctx, input, start, sinks)
}

// ToolAgent is a streaming agent that uses tools: it runs the tool-call loop
// (core.RunTools) on the input, streams the model's text as the run's text,
// and reports an event for each tool call, approval, decision and result
// (types core.EventToolCall, EventApproval, EventDecision, EventToolResult;
// Data: the core.ToolEvent as JSON), then its usage (EventUsage).
//
// Before each call CanUseTool decides (allow, deny with a reason the model
// sees, or ask); an ask is answered through the host's Ask (Collect's
// Approve option, task.approve records when hosted by Kind with
// ApproveByRecords, or a Remote caller's Approve). With nobody to ask, the run fails
// with a core.CodeApproval error whose cause is the *core.Pause.
type ToolAgent struct {
	// LLM and Tools to use; nil for the scope in the run's context
	// (core.From), whose permissions then apply.
	LLM   core.LLM
	Tools *core.Tools
	// Names are the tools the model may call. Required.
	Names []string
	// System is the system prompt.
	System string
	// MaxSteps bounds the model calls. Default 8.
	MaxSteps int
	// CanUseTool is the approval hook; nil allows every call.
	CanUseTool core.CanUseTool
}

// Start implements Agent.
func (a ToolAgent) Start(ctx context.Context, input string, start Start, sinks Sinks) (Handle, error) {
	if len(a.Names) == 0 {
		return nil, core.Errorf(core.CodeInvalid, "task.tools", "a tool agent needs Names")
	}
	return Func(func(ctx context.Context, input string, _ Start, out Output) error {
		steps := a.MaxSteps
		if steps == 0 {
			steps = 8
		}
		opts := []core.ToolOption{
			core.StreamTo(out.Text),
			core.OnToolEvent(func(e core.ToolEvent) {
				b, err := json.Marshal(e)
				if err == nil {
					out.Event(Event{Type: e.Type, Data: b})
				}
			}),
		}
		if a.CanUseTool != nil {
			opts = append(opts, core.WithCanUseTool(a.CanUseTool))
		}
		if out.Ask != nil {
			opts = append(opts, core.WithAsker(out.Ask))
		}
		req := core.Prompt(a.System, input)
		var res core.Response
		var err error
		if a.LLM != nil && a.Tools != nil {
			res, _, err = core.RunTools(ctx, a.LLM, a.Tools, req, a.Names, steps, opts...)
		} else {
			scope, serr := core.From(ctx)
			if serr != nil {
				return serr
			}
			res, _, err = scope.RunTools(ctx, req, a.Names, steps, opts...)
		}
		if res.Usage != (core.Usage{}) {
			out.Event(UsageEvent(res.Usage))
		}
		return err
	}).Start(ctx, input, start, sinks)
}

var (
	_ Agent = Func(nil)
	_ Agent = LLMAgent{}
	_ Agent = ToolAgent{}
)
