package task

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/records"
)

// Record types of remote runs.
const (
	// TypeTask starts a run; payload Request, EA-Process the session.
	TypeTask = "task"
	// TypeChunk is streamed text (payload Chunk), published as it comes,
	// chunks gathered into fewer records (see CoalesceText).
	TypeChunk = "task.chunk"
	// TypeEvent is an Event, published at once.
	TypeEvent = "task.event"
	// TypeDone ends a completed run (payload Done).
	TypeDone = "task.done"
	// TypeError ends a failed or cancelled run (payload Failure).
	TypeError = "task.error"
	// TypeApprove answers a tool-call approval of the run of its EA-Process
	// (payload Answer). Sent to the effector's mailbox by anyone: the waiting
	// run reads it from the stream (see ApproveByRecords).
	TypeApprove = "task.approve"
)

// Answer is the payload of a task.approve record.
type Answer struct {
	// ID is the approval's id (the tool call's id, core.Approval.ID).
	ID      string       `json:"id"`
	Verdict core.Verdict `json:"verdict"`
	Reason  string       `json:"reason,omitempty"`
}

// Request is the payload of a task record.
type Request struct {
	Input     string `json:"input"`
	Workspace string `json:"workspace,omitempty"`
}

// Chunk is the payload of a task.chunk record.
type Chunk struct {
	Text string `json:"text"`
}

// Done is the payload of a task.done record: how many task.chunk and
// task.event records the run published, and its token usage (the sum of its
// usage events).
type Done struct {
	Chunks int        `json:"chunks"`
	Events int        `json:"events"`
	Usage  core.Usage `json:"usage"`
}

// Failure is the payload of a task.error record.
type Failure struct {
	// Code is a core.Code: failed, cancelled, provider, …
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Stats is the state of a task effector: counts of its runs by outcome.
type Stats struct {
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// Kind hosts agent as an effector kind: each "task" record (EA-Process =
// session) runs the agent to its end within the logic; its text and events
// are published on the outbox as they come (EmitNow) — text gathered into
// fewer, larger task.chunk records by CoalesceText's rule, by default at most
// 50ms or 2 KiB — then task.done or task.error,
// all in the task's process. A "cancel" record of that process cancels the
// run (the node cancels the logic's context; the agent sees its context end).
// A failed run is an outcome, not a logic failure: it is reported with
// task.error and the record is not retried. The agent gets the logic's
// context, so a kind wrapped with core.Wrap gives it the services.
//
// A tool-call approval the agent asks for is announced by its tool.approval
// event; with ApproveByRecords it is answered by a task.approve record of
// the same process sent to the effector's mailbox (by a person with the nats
// CLI, a Remote caller, an orchestration), which the waiting run reads from
// the stream: durable, and found again if the run is redone after a crash.
// Without that option the run fails with a core.CodeApproval error.
func Kind(name string, agent Agent, opts ...KindOption) actor.Kind[Stats] {
	var ko kindOptions
	for _, o := range opts {
		if o != nil {
			o(&ko)
		}
	}
	return actor.Kind[Stats]{Name: name, Logic: func(c *actor.Context, s Stats) (Stats, error) {
		rec := c.Record()
		switch rec.Type {
		case actor.TypeCancel, TypeApprove:
			return s, nil // it took effect on the run it names, if any
		case TypeTask:
		default:
			return s, actor.UnknownType(rec.Type)
		}
		if agent == nil {
			return s, actor.Permanent(core.Errorf(core.CodeUnavailable, "task.kind", "kind %q has no agent", name))
		}
		if rec.Process == "" {
			return s, actor.Permanent(core.Errorf(core.CodeInvalid, "task.kind", "a task record needs EA-Process (the session id)"))
		}
		var req Request
		if err := c.Decode(&req); err != nil {
			return s, err
		}
		return serve(c, s, agent, req, ko)
	}}
}

// KindOption adjusts Kind.
type KindOption func(*kindOptions)

type kindOptions struct {
	conn     *bus.Conn
	coalesce core.Coalesce
}

// CoalesceText sets how the run's streamed text is gathered into task.chunk
// records (see core.Coalesce): by default a chunk waits at most 50ms for
// more text and 2 KiB goes out at once; core.NoCoalesce publishes every
// chunk as its own record.
func CoalesceText(c core.Coalesce) KindOption {
	return func(o *kindOptions) { o.coalesce = c }
}

// ApproveByRecords lets runs wait for task.approve records: conn reads the
// effector's mailbox from the task record on, for an answer of the run's
// process to the approval asked.
func ApproveByRecords(conn *bus.Conn) KindOption {
	return func(o *kindOptions) { o.conn = conn }
}

// mailboxAsker answers approvals from task.approve records in c's mailbox
// after the task record in hand.
func mailboxAsker(c *actor.Context, conn *bus.Conn) core.Asker {
	rec, self := c.Record(), c.Self()
	return func(ctx context.Context, a core.Approval) (core.Decision, error) {
		const op = "task.approve"
		if conn == nil || conn.JetStream() == nil {
			return core.Decision{}, core.Errorf(core.CodeUnavailable, op, "no connection to read approvals with")
		}
		names := conn.Names()
		cons, err := conn.JetStream().OrderedConsumer(ctx, names.MailboxStreamFor(self), jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{names.StoredMailbox(self)},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:    rec.Seq + 1,
		})
		if err != nil {
			if ctx.Err() != nil {
				return core.Decision{}, core.E(core.CodeCancelled, op, context.Cause(ctx))
			}
			return core.Decision{}, core.E(core.CodeUnavailable, op, err)
		}
		it, err := cons.Messages()
		if err != nil {
			return core.Decision{}, core.E(core.CodeUnavailable, op, err)
		}
		defer it.Stop()
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil {
					return core.Decision{}, core.E(core.CodeCancelled, op, context.Cause(ctx))
				}
				return core.Decision{}, core.E(core.CodeUnavailable, op, err)
			}
			r, err := records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
			if err != nil || r.Type != TypeApprove || r.Process != rec.Process {
				continue
			}
			var ans Answer
			if r.Decode(&ans) != nil || ans.ID != a.ID {
				continue
			}
			return core.Decision{Verdict: ans.Verdict, Reason: ans.Reason}, nil
		}
	}
}

type item struct {
	text  string
	event *Event
	end   bool
	err   error
}

func serve(c *actor.Context, s Stats, agent Agent, req Request, ko kindOptions) (Stats, error) {
	rec := c.Record()
	ch := make(chan item, 64)
	sinks := Sinks{
		Text:  func(t string) { ch <- item{text: t} },
		Event: func(e Event) { ch <- item{event: &e} },
		Done:  func() { ch <- item{end: true} },
		Fail:  func(err error) { ch <- item{end: true, err: err} },
	}
	if ko.conn != nil {
		sinks.Ask = mailboxAsker(c, ko.conn)
	}
	h, err := agent.Start(c, req.Input, Start{Session: rec.Process, Workspace: req.Workspace}, sinks)
	if err != nil {
		return s, c.Emit(TypeError, failure(c, err))
	}
	var done Done
	var pubErr error
	// Text is gathered into fewer, larger task.chunk records (ko.coalesce):
	// what is gathered goes out before any event and before the end.
	co := core.NewCoalescer(ko.coalesce)
	flush := func() {
		if text, ok := co.Flush(); ok && pubErr == nil {
			done.Chunks++
			if pubErr = c.EmitNow(TypeChunk, Chunk{Text: text}); pubErr != nil {
				h.Cancel()
			}
		}
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if at, ok := co.Due(); ok && pubErr == nil {
			timer.Reset(time.Until(at))
			due = timer.C
		}
		var it item
		select {
		case it = <-ch:
		case <-due:
			flush()
			continue
		}
		switch {
		case it.end:
			flush()
			if pubErr != nil {
				return s, pubErr // retried; chunks already published are de-duplicated
			}
			if it.err != nil {
				f := failure(c, it.err)
				if f.Code == string(core.CodeCancelled) {
					s.Cancelled++
				} else {
					s.Failed++
				}
				return s, c.Emit(TypeError, f)
			}
			s.Completed++
			return s, c.Emit(TypeDone, done)
		case pubErr != nil:
			// Publishing failed: the run is being cancelled; drain it.
		case it.event != nil:
			flush()
			if pubErr != nil {
				continue
			}
			done.Events++
			if it.event.Type == EventUsage {
				done.Usage = done.Usage.Add(SumUsage([]Event{*it.event}))
			}
			if pubErr = c.EmitNow(TypeEvent, *it.event); pubErr != nil {
				h.Cancel()
			}
		default:
			if text, ok := co.Add(it.text); ok {
				done.Chunks++
				if pubErr = c.EmitNow(TypeChunk, Chunk{Text: text}); pubErr != nil {
					h.Cancel()
				}
			}
		}
	}
}

func failure(ctx context.Context, err error) Failure {
	code := core.CodeOf(err)
	if errors.Is(context.Cause(ctx), actor.ErrCancelled) || errors.Is(err, actor.ErrCancelled) {
		code = core.CodeCancelled
	}
	if code == "" {
		code = core.CodeFailed
	}
	return Failure{Code: string(code), Message: err.Error()}
}

// Remote is an Agent run by effector Target (a kind made with Kind) on
// whichever node hosts it. The effector must exist.
type Remote struct {
	Client *actor.Client
	Target records.Ref
	// StopWait is how long a cancelled run waits for the effector to confirm
	// that it stopped before it reports the cancellation anyway (a node may be
	// down). Default 30s.
	StopWait time.Duration
}

var _ Agent = Remote{}

// Start subscribes to the target's outbox, sends the task record and feeds
// the records of the session to sinks. Ending ctx cancels the run like
// Handle.Cancel.
func (r Remote) Start(ctx context.Context, input string, start Start, sinks Sinks) (Handle, error) {
	const op = "task.remote"
	if r.Client == nil {
		return nil, core.Errorf(core.CodeInvalid, op, "no client")
	}
	if err := records.ValidateKind(r.Target.Kind); err != nil {
		return nil, core.Errorf(core.CodeInvalid, op, "target: %w", err)
	}
	if err := records.ValidateID(r.Target.ID); err != nil {
		return nil, core.Errorf(core.CodeInvalid, op, "target: %w", err)
	}
	if sinks.Done == nil || sinks.Fail == nil {
		return nil, core.Errorf(core.CodeInvalid, op, "sinks need Done and Fail")
	}
	if start.Session == "" {
		start.Session = records.NewID()
	} else if err := records.ValidateID(start.Session); err != nil {
		return nil, core.Errorf(core.CodeInvalid, op, "session: %w", err)
	}
	wait := r.StopWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	// The subscription outlives ctx: after a cancel it waits for the
	// effector's confirmation that the run stopped.
	subCtx, stopSub := context.WithCancelCause(context.WithoutCancel(ctx))
	outputs, err := r.Client.Subscribe(subCtx, r.Target)
	if err != nil {
		stopSub(nil)
		return nil, core.E(core.CodeUnavailable, op, err)
	}
	task, err := records.New(TypeTask, Request{Input: input, Workspace: start.Workspace})
	if err != nil {
		stopSub(nil)
		return nil, core.E(core.CodeInvalid, op, err)
	}
	task.Process = start.Session
	// Sent whatever happens to ctx meanwhile (bounded by StopWait): a task
	// record that may be stored must be followed by its cancel, not orphaned.
	sendCtx, cancelSend := context.WithTimeout(context.WithoutCancel(ctx), wait)
	_, err = r.Client.Send(sendCtx, r.Target, task)
	cancelSend()
	if err != nil {
		stopSub(nil)
		return nil, core.E(core.CodeUnavailable, op, err)
	}
	h := &remoteHandle{r: r, session: start.Session, sendCtx: context.WithoutCancel(ctx), stopSub: stopSub, wait: wait}
	unwatch := context.AfterFunc(ctx, h.Cancel)
	askCtx, stopAsks := context.WithCancel(ctx)
	var asks sync.WaitGroup
	go func() {
		defer unwatch()
		defer stopSub(nil)
		defer h.ended()
		// No sink is called after Done or Fail: asks still waiting stop first.
		end := func() { stopAsks(); asks.Wait() }
		defer end()
		for out, err := range outputs {
			if err != nil || out.Process != start.Session {
				continue
			}
			switch out.Type {
			case TypeChunk:
				var c Chunk
				if out.Decode(&c) == nil && sinks.Text != nil {
					sinks.Text(c.Text)
				}
			case TypeEvent:
				var e Event
				if out.Decode(&e) != nil {
					continue
				}
				if sinks.Event != nil {
					sinks.Event(e)
				}
				if e.Type == core.EventApproval && sinks.Ask != nil {
					var te core.ToolEvent
					if json.Unmarshal(e.Data, &te) == nil && te.Approval != nil {
						asks.Add(1)
						go func(a core.Approval) {
							defer asks.Done()
							r.answer(askCtx, start.Session, a, sinks.Ask)
						}(*te.Approval)
					}
				}
			case TypeDone:
				end()
				sinks.Done()
				return
			case TypeError:
				var f Failure
				if err := out.Decode(&f); err != nil {
					f = Failure{Code: string(core.CodeFailed), Message: "undecodable task.error: " + err.Error()}
				}
				end()
				sinks.Fail(core.E(core.Code(f.Code), op+" "+r.Target.String(), errors.New(f.Message)))
				return
			}
		}
		// The subscription ended without the run's end: cancelled and
		// unconfirmed, or the connection closed.
		end()
		sinks.Fail(core.E(core.CodeCancelled, op+" "+r.Target.String(), context.Cause(subCtx)))
	}()
	return h, nil
}

// answer asks ask about a and sends the answer to the target as a
// task.approve record of session.
func (r Remote) answer(ctx context.Context, session string, a core.Approval, ask core.Asker) {
	d, err := ask(ctx, a)
	if err != nil {
		return // the run ended, or the asker gave up: someone else may answer
	}
	rec, err := records.New(TypeApprove, Answer{ID: a.ID, Verdict: d.Verdict, Reason: d.Reason})
	if err != nil {
		return
	}
	rec.Process = session
	_, _ = r.Client.Send(ctx, r.Target, rec)
}

type remoteHandle struct {
	r       Remote
	session string
	sendCtx context.Context
	stopSub context.CancelCauseFunc
	wait    time.Duration
	once    sync.Once

	mu    sync.Mutex
	done  bool
	timer *time.Timer
}

// ended stops the confirmation timer once the run's end is in.
func (h *remoteHandle) ended() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if h.timer != nil {
		h.timer.Stop()
	}
}

func (h *remoteHandle) Session() string { return h.session }

// errStopUnconfirmed ends a cancelled run's subscription when the effector
// does not confirm in time.
var errStopUnconfirmed = errors.New("the effector did not confirm that the run stopped")

// Cancel sends a high-priority cancel record of the session to the effector.
func (h *remoteHandle) Cancel() {
	h.once.Do(func() {
		ctx, cancel := context.WithTimeout(h.sendCtx, h.wait)
		defer cancel()
		rec, err := records.New(actor.TypeCancel, nil)
		if err == nil {
			rec.Process = h.session
			rec.Priority = records.PriorityHigh
			_, err = h.r.Client.Send(ctx, h.r.Target, rec)
		}
		if err != nil {
			h.stopSub(errors.Join(errStopUnconfirmed, err))
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.done {
			h.timer = time.AfterFunc(h.wait, func() { h.stopSub(errStopUnconfirmed) })
		}
	})
}
