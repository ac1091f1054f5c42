package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"
)

// Verdict is what a [CanUseTool] hook or an answer to an [Approval] decides
// about one tool call.
type Verdict string

// The verdicts.
const (
	// VerdictAllow runs the call.
	VerdictAllow Verdict = "allow"
	// VerdictDeny does not run it; the model gets the reason as the call's result.
	VerdictDeny Verdict = "deny"
	// VerdictAsk pauses the call until someone answers (an [Asker], or a
	// [Pause] resumed with the answer).
	VerdictAsk Verdict = "ask"
)

// Decision is a verdict on a tool call and why.
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Reason is shown to the model when the call is denied, and to whoever
	// is asked when the verdict is ask.
	Reason string `json:"reason,omitempty"`
}

// Allow runs the call.
func Allow() Decision { return Decision{Verdict: VerdictAllow} }

// Deny refuses the call; the model sees "denied: <reason>" as its result.
func Deny(reason string) Decision { return Decision{Verdict: VerdictDeny, Reason: reason} }

// Ask pauses the call until someone answers; reason says why.
func Ask(reason string) Decision { return Decision{Verdict: VerdictAsk, Reason: reason} }

// Approval is the question about one tool call that someone must answer
// with allow or deny.
type Approval struct {
	// ID is the tool call's id (unique within the conversation).
	ID     string   `json:"id"`
	Call   ToolCall `json:"call"`
	Reason string   `json:"reason,omitempty"`
}

// CanUseTool is the hook asked before each tool call of a tool-call loop
// (Claude's canUseTool): allow, deny with a reason the model sees, or ask.
// An error ends the loop with it.
type CanUseTool func(ctx context.Context, call ToolCall) (Decision, error)

// Asker answers an [Approval]: it blocks until the answer arrives or ctx
// ends (then it returns ctx's error). An answer other than allow or deny
// counts as deny. Implementations: [Approvals] (from Go), task.Kind's (over
// NATS), or none — then the loop pauses with a [Pause].
type Asker func(ctx context.Context, a Approval) (Decision, error)

// ToolEvent types.
const (
	// EventToolCall: the model asked for a call (Call).
	EventToolCall = "tool.call"
	// EventApproval: a call waits for an answer (Approval).
	EventApproval = "tool.approval"
	// EventDecision: a call was allowed or denied after asking, or denied by
	// the hook (Decision).
	EventDecision = "tool.decision"
	// EventToolResult: a call ran or was refused (Result; Error when the
	// tool failed).
	EventToolResult = "tool.result"
)

// ToolEvent is what a tool-call loop reports as it goes ([OnToolEvent]).
type ToolEvent struct {
	Type string `json:"type"`
	// Step is the model call the event follows, from 1.
	Step     int       `json:"step"`
	Call     ToolCall  `json:"call"`
	Approval *Approval `json:"approval,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	// Result is what the model gets back for the call.
	Result string `json:"result,omitempty"`
	// Error is set when the tool failed (Result then starts with "error: ").
	Error string `json:"error,omitempty"`
}

// Pause is where a tool-call loop stopped to wait for an approval: the
// cause of its CodeApproval error. Keep it (it encodes as JSON) and resume
// with [ResumeFrom] and the answer.
type Pause struct {
	// Messages is the conversation so far, ending with the assistant's
	// tool calls and the results of those already handled.
	Messages []Message `json:"messages"`
	// Step is the number of model calls made.
	Step int `json:"step"`
	// Approval is the question waiting for an answer.
	Approval Approval `json:"approval"`
	// Usage is the tokens used so far.
	Usage Usage `json:"usage"`
}

func (p *Pause) Error() string {
	return fmt.Sprintf("tool call %s (%s) waits for approval", p.Approval.ID, p.Approval.Call.Name)
}

// ToolOption adjusts [RunTools].
type ToolOption func(*loopConfig) error

type loopConfig struct {
	can     CanUseTool
	ask     Asker
	event   func(ToolEvent)
	text    func(string)
	resume  *Pause
	answers map[string]Decision
}

// WithCanUseTool sets the hook asked before each tool call. Without one every
// call of an allowed tool runs.
func WithCanUseTool(fn CanUseTool) ToolOption {
	return func(c *loopConfig) error { c.can = fn; return nil }
}

// WithAsker sets who answers calls the hook asks about. Without one, an ask
// pauses the loop: it returns a CodeApproval error whose cause is a *Pause.
func WithAsker(fn Asker) ToolOption {
	return func(c *loopConfig) error { c.ask = fn; return nil }
}

// OnToolEvent receives an event for each tool call, approval, decision and
// result, in order, on the loop's goroutine.
func OnToolEvent(fn func(ToolEvent)) ToolOption {
	return func(c *loopConfig) error { c.event = fn; return nil }
}

// StreamTo makes the loop stream each model call and hand its text to fn as
// it arrives.
func StreamTo(fn func(text string)) ToolOption {
	return func(c *loopConfig) error { c.text = fn; return nil }
}

// ResumeFrom continues a loop that paused (p) with answers to approvals, by
// approval id. The request's messages are ignored: p has the conversation.
func ResumeFrom(p Pause, answers map[string]Decision) ToolOption {
	return func(c *loopConfig) error {
		if len(p.Messages) == 0 {
			return Errorf(CodeInvalid, "tools.loop", "resume: the pause has no messages")
		}
		c.resume = &p
		c.answers = answers
		return nil
	}
}

// RunTools runs the tool-call loop: it asks m, runs the tools the answer
// calls (each must be in names), appends their results to the conversation
// and asks again, until an answer without tool calls, which it returns with
// the whole conversation and the usage of every model call summed. It gives
// up with a CodeSteps error after maxSteps model calls.
//
// Before each call the [CanUseTool] hook (WithCanUseTool) decides: allow runs
// it, deny hands "denied: <reason>" to the model instead, ask waits for an
// [Asker] (WithAsker) or, without one, pauses the loop (a CodeApproval error
// whose cause is a *[Pause]; resume with [ResumeFrom]). A tool's error is
// handed to the model as the tool's result ("error: …") so it can recover;
// permission, cancellation and timeout errors end the loop. ctx ending stops
// the loop, its model call and its tool.
func RunTools(ctx context.Context, m LLM, tools *Tools, req Request, names []string, maxSteps int, opts ...ToolOption) (Response, []Message, error) {
	const op = "tools.loop"
	if m == nil || tools == nil {
		return Response{}, nil, Errorf(CodeUnavailable, op, "needs an LLM and a tool registry")
	}
	if maxSteps < 1 {
		return Response{}, nil, Errorf(CodeInvalid, op, "maxSteps must be at least 1, got %d", maxSteps)
	}
	var cfg loopConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return Response{}, nil, err
		}
	}
	req.Tools = nil
	for _, n := range names {
		spec, err := tools.Spec(n)
		if err != nil {
			return Response{}, nil, err
		}
		req.Tools = append(req.Tools, spec)
	}
	l := &loop{cfg: cfg, m: m, tools: tools, names: names, msgs: slices.Clone(req.Messages)}
	if cfg.resume != nil {
		l.msgs, l.step, l.usage = slices.Clone(cfg.resume.Messages), cfg.resume.Step, cfg.resume.Usage
	}
	for {
		if err := l.callTools(ctx); err != nil {
			return Response{Usage: l.usage}, l.msgs, err
		}
		if l.step >= maxSteps {
			return Response{Usage: l.usage}, l.msgs, Errorf(CodeSteps, op, "no final answer after %d model calls", maxSteps)
		}
		req.Messages = l.msgs
		resp, err := l.ask(ctx, req)
		l.step++
		l.usage = l.usage.Add(resp.Usage)
		if err != nil {
			return Response{Usage: l.usage}, l.msgs, err
		}
		l.msgs = append(l.msgs, resp.Message())
		if len(resp.ToolCalls) == 0 {
			resp.Usage = l.usage
			return resp, l.msgs, nil
		}
	}
}

type loop struct {
	cfg   loopConfig
	m     LLM
	tools *Tools
	names []string
	msgs  []Message
	step  int
	usage Usage
}

func (l *loop) emit(e ToolEvent) {
	if l.cfg.event != nil {
		e.Step = l.step
		l.cfg.event(e)
	}
}

// ask makes one model call, streamed when the loop streams.
func (l *loop) ask(ctx context.Context, req Request) (Response, error) {
	if l.cfg.text == nil {
		return l.m.Generate(ctx, req)
	}
	for d, err := range l.m.Stream(ctx, req) {
		if err != nil {
			return Response{}, err
		}
		if d.Final != nil {
			return *d.Final, nil
		}
		l.cfg.text(d.Text)
	}
	if ctx.Err() != nil {
		return Response{}, E(CodeCancelled, "tools.loop", context.Cause(ctx))
	}
	return Response{}, Errorf(CodeProvider, "tools.loop", "the stream ended without a final answer")
}

// callTools handles the calls of the last assistant message that have no
// result yet.
func (l *loop) callTools(ctx context.Context) error {
	last := -1
	for i := len(l.msgs) - 1; i >= 0; i-- {
		if l.msgs[i].Role == RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 || len(l.msgs[last].ToolCalls) == 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range l.msgs[last+1:] {
		if m.Role == RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	// The messages may share their tool calls with the caller's (a Pause):
	// copy before naming calls that came without an id.
	l.msgs[last].ToolCalls = slices.Clone(l.msgs[last].ToolCalls)
	for i, call := range l.msgs[last].ToolCalls {
		if call.ID == "" {
			call.ID = "call-" + strconv.Itoa(l.step) + "-" + strconv.Itoa(i)
			l.msgs[last].ToolCalls[i].ID = call.ID
		}
		if answered[call.ID] {
			continue
		}
		out, err := l.call(ctx, call)
		if err != nil {
			return err
		}
		l.msgs = append(l.msgs, Message{Role: RoleTool, Content: out, ToolCallID: call.ID})
	}
	return nil
}

// call decides on one call and runs it, returning what the model gets back.
func (l *loop) call(ctx context.Context, call ToolCall) (string, error) {
	const op = "tools.loop"
	l.emit(ToolEvent{Type: EventToolCall, Call: call})
	if !slices.Contains(l.names, call.Name) {
		out := fmt.Sprintf("error: no tool %q is available", call.Name)
		l.emit(ToolEvent{Type: EventToolResult, Call: call, Result: out, Error: out})
		return out, nil
	}
	d := Allow()
	if l.cfg.can != nil {
		var err error
		if d, err = l.cfg.can(ctx, call); err != nil {
			return "", asError(op+" can use tool", ctx, err)
		}
	}
	asked := false
	if d.Verdict == VerdictAsk {
		asked = true
		a := Approval{ID: call.ID, Call: call, Reason: d.Reason}
		if ans, ok := l.cfg.answers[a.ID]; ok {
			d = ans
		} else {
			l.emit(ToolEvent{Type: EventApproval, Call: call, Approval: &a})
			if l.cfg.ask == nil {
				msgs := slices.Clone(l.msgs)
				return "", E(CodeApproval, op, &Pause{Messages: msgs, Step: l.step, Approval: a, Usage: l.usage})
			}
			var err error
			if d, err = l.cfg.ask(ctx, a); err != nil {
				return "", asError(op+" ask", ctx, err)
			}
		}
	}
	switch d.Verdict {
	case VerdictAllow:
	case VerdictDeny:
	default:
		d = Deny(fmt.Sprintf("no valid answer (%q)", d.Verdict))
	}
	if asked || d.Verdict == VerdictDeny {
		l.emit(ToolEvent{Type: EventDecision, Call: call, Decision: &d})
	}
	if d.Verdict == VerdictDeny {
		out := "denied: " + d.Reason
		if d.Reason == "" {
			out = "denied"
		}
		l.emit(ToolEvent{Type: EventToolResult, Call: call, Result: out})
		return out, nil
	}
	res, err := l.tools.Call(ctx, call.Name, call.Arguments)
	if err != nil {
		switch CodeOf(err) {
		case CodePermission, CodeCancelled, CodeTimeout:
			return "", err
		}
		if ctx.Err() != nil {
			return "", E(CodeCancelled, op, context.Cause(ctx))
		}
		out := "error: " + err.Error()
		l.emit(ToolEvent{Type: EventToolResult, Call: call, Result: out, Error: err.Error()})
		return out, nil
	}
	l.emit(ToolEvent{Type: EventToolResult, Call: call, Result: res})
	return res, nil
}

// asError makes err an *Error: cancelled when ctx ended, failed otherwise.
func asError(op string, ctx context.Context, err error) error {
	if CodeOf(err) != "" {
		return err
	}
	if ctx.Err() != nil {
		return E(CodeCancelled, op, context.Cause(ctx))
	}
	return E(CodeFailed, op, err)
}
