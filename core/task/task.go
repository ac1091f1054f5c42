package task

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/records"
)

// Start is the context a run starts in.
type Start struct {
	// Session identifies the run (and its records' EA-Process); empty for a
	// new one.
	Session string `json:"session,omitempty"`
	// Workspace names what the agent works on (a directory, a project…).
	Workspace string `json:"workspace,omitempty"`
}

// Event is a structured progress event of a run.
type Event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// EventUsage is the type of the event an agent reports its token usage with
// (Data: a core.Usage); Collect sums them into Result.Usage.
const EventUsage = "llm.usage"

// UsageEvent returns the event reporting u.
func UsageEvent(u core.Usage) Event {
	b, _ := json.Marshal(u) // a struct of two ints always encodes
	return Event{Type: EventUsage, Data: b}
}

// Sinks receive a run's output. An agent calls Text and Event any number of
// times, from one goroutine at a time, then exactly one of Done or Fail; it
// calls nothing after that.
//
// Ask, when set, is how the host answers a tool-call approval the agent asks
// for (a core.Asker: it blocks until the answer arrives): Collect's Approve
// option, the mailbox of an effector hosting the agent (Kind), or the caller
// of a Remote run. When nil the agent cannot ask: its tool loop pauses and
// the run fails with a core.CodeApproval error.
type Sinks struct {
	Text  func(chunk string)
	Event func(Event)
	Done  func()
	Fail  func(error)
	Ask   core.Asker
}

// Handle is a started run.
type Handle interface {
	// Session returns the run's session id.
	Session() string
	// Cancel asks the run to stop; the agent then reports Fail with a
	// CodeCancelled error (or Done if it had already finished). Safe to call
	// more than once and from any goroutine.
	Cancel()
}

// Agent is a runnable agent. Start begins a run and returns at once; the run
// goes on in the background until it reports Done or Fail through sinks.
// Ending ctx cancels the run like Handle.Cancel.
type Agent interface {
	Start(ctx context.Context, input string, start Start, sinks Sinks) (Handle, error)
}

// Result is what a run produced.
type Result struct {
	// Text is the concatenation of the text chunks.
	Text string `json:"text"`
	// Events in the order they came.
	Events []Event `json:"events,omitempty"`
	// Session is the run's session id.
	Session string `json:"session"`
	// Elapsed is the time from start to outcome.
	Elapsed time.Duration `json:"elapsed"`
	// Partial is set when the run did not complete: Text and Events are what
	// came before the failure, timeout or cancellation.
	Partial bool `json:"partial,omitempty"`
	// Usage sums the agent's usage events (EventUsage).
	Usage core.Usage `json:"usage"`
}

// Option adjusts Collect.
type Option func(*options) error

type options struct {
	timeout time.Duration
	grace   time.Duration
	start   Start
	ask     core.Asker
}

// Approve answers the run's tool-call approvals with ask (for example
// core.NewApprovals().Ask, or a function that asks a person).
func Approve(ask core.Asker) Option {
	return func(o *options) error {
		if ask == nil {
			return core.Errorf(core.CodeInvalid, "task.collect", "approve: nil asker")
		}
		o.ask = ask
		return nil
	}
}

// Timeout bounds the run: past d it is cancelled and Collect fails with a
// CodeTimeout error. d must be > 0.
func Timeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return core.Errorf(core.CodeInvalid, "task.collect", "timeout must be > 0, got %v", d)
		}
		o.timeout = d
		return nil
	}
}

// StopGrace is how long Collect waits, after cancelling a run, for the agent
// to report that it stopped. Default 10s.
func StopGrace(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return core.Errorf(core.CodeInvalid, "task.collect", "stop grace must be > 0, got %v", d)
		}
		o.grace = d
		return nil
	}
}

// With sets the run's session and workspace.
func With(s Start) Option {
	return func(o *options) error {
		if s.Session != "" {
			if err := records.ValidateID(s.Session); err != nil {
				return core.Errorf(core.CodeInvalid, "task.collect", "session: %w", err)
			}
		}
		o.start = s
		return nil
	}
}

// collector gathers one run's output.
type collector struct {
	mu       sync.Mutex
	text     strings.Builder
	events   []Event
	frozen   bool  // no more output is taken
	reported bool  // the agent called Done or Fail
	err      error // what it reported
	ended    chan struct{}
}

func newCollector() *collector { return &collector{ended: make(chan struct{})} }

func (c *collector) sinks() Sinks {
	return Sinks{
		Text: func(s string) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.frozen {
				c.text.WriteString(s)
			}
		},
		Event: func(e Event) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.frozen {
				c.events = append(c.events, e)
			}
		},
		Done: func() { c.report(nil) },
		Fail: func(err error) {
			if err == nil {
				err = core.Errorf(core.CodeFailed, "task", "agent failed without an error")
			}
			c.report(err)
		},
	}
}

// report records the agent's end; only the first call counts.
func (c *collector) report(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reported {
		return
	}
	c.reported, c.err, c.frozen = true, err, true
	close(c.ended)
}

// freeze stops taking output and returns what came so far, and whether the
// agent had already reported its end (and with what).
func (c *collector) freeze() (text string, events []Event, reported bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = true
	return c.text.String(), slices.Clone(c.events), c.reported, c.err
}

// Collect starts a run of a on input and waits for its one outcome:
//
//   - completed: the result and nil;
//   - failed: the partial result (Partial set) and the agent's error as a
//     *core.Error (CodeFailed unless the agent gave a code);
//   - timed out (Timeout option): partial result and a CodeTimeout error;
//   - cancelled (ctx ended): partial result and a CodeCancelled error.
//
// On timeout and cancellation the run is cancelled and Collect waits for the
// agent to report its end (up to StopGrace), so its work has stopped when
// Collect returns. Output the agent sends after the outcome is dropped.
func Collect(ctx context.Context, a Agent, input string, opts ...Option) (Result, error) {
	const op = "task.collect"
	o := options{grace: 10 * time.Second}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return Result{}, err
		}
	}
	if a == nil {
		return Result{}, core.Errorf(core.CodeInvalid, op, "no agent")
	}
	if o.start.Session == "" {
		o.start.Session = records.NewID()
	}
	begin := time.Now()
	if err := context.Cause(ctx); err != nil {
		return Result{Session: o.start.Session, Partial: true}, core.E(core.CodeCancelled, op, err)
	}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	c := newCollector()
	sinks := c.sinks()
	sinks.Ask = o.ask
	h, err := a.Start(runCtx, input, o.start, sinks)
	if err != nil {
		return Result{Session: o.start.Session, Partial: true}, asCore(op, err)
	}
	session := h.Session()
	var timeout <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		timeout = t.C
	}
	// The outcome is decided once: the agent's own report, unless the
	// timeout or the caller's cancellation came first.
	var outcome error
	select {
	case <-c.ended:
	case <-timeout:
		outcome = core.Errorf(core.CodeTimeout, op, "run %s took longer than %v", session, o.timeout)
	case <-ctx.Done():
		outcome = core.E(core.CodeCancelled, op, context.Cause(ctx))
	}
	text, events, reported, err := c.freeze()
	res := Result{Text: text, Events: events, Session: session, Elapsed: time.Since(begin), Usage: SumUsage(events)}
	switch {
	case outcome != nil && !reported:
		h.Cancel()
		cancelRun()
		grace := time.NewTimer(o.grace)
		defer grace.Stop()
		select { // let the agent stop its work (close its streams) first
		case <-c.ended:
		case <-grace.C:
		}
		res.Partial = true
		return res, outcome
	case err != nil:
		res.Partial = true
		return res, asCore(op, err)
	}
	return res, nil
}

// SumUsage sums the usage events among events.
func SumUsage(events []Event) core.Usage {
	var sum core.Usage
	for _, e := range events {
		if e.Type != EventUsage {
			continue
		}
		var u core.Usage
		if json.Unmarshal(e.Data, &u) == nil {
			sum = sum.Add(u)
		}
	}
	return sum
}

// asCore makes err a *core.Error (CodeFailed unless it has a code).
func asCore(op string, err error) error {
	if core.CodeOf(err) != "" {
		return err
	}
	return core.E(core.CodeFailed, op, err)
}
