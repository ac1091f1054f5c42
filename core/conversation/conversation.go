package conversation

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/records"
)

// Record types.
const (
	// TypeMessage is one turn: payload Message.
	TypeMessage = "message"
	// TypeChunk is a piece of the answer as it streams (payload {"text"}),
	// published on the outbox as it comes, chunks gathered by
	// Config.Coalesce (by default at most 50ms or 2 KiB of text).
	TypeChunk = "message.chunk"
	// TypeReply is the whole answer of a turn on the outbox (payload Reply).
	TypeReply = "reply"
	// TypeResult answers a message that has an EA-Reply (payload Reply).
	TypeResult = "result"
)

// SummaryPrompt is the default summarising policy's system prompt.
const SummaryPrompt = "Summarise the conversation below for your own memory: keep names, facts, decisions and open questions; at most a paragraph. Answer with the summary only."

// Message is the payload of a message record.
type Message struct {
	Text string `json:"text"`
}

// Reply is the answer to one turn.
type Reply struct {
	// Turn is the turn's number, from 1.
	Turn  int        `json:"turn"`
	Text  string     `json:"text"`
	Usage core.Usage `json:"usage"`
}

// Turn is one exchange: the user's text and the assistant's answer.
type Turn struct {
	N         int    `json:"n"`
	User      string `json:"user"`
	Assistant string `json:"assistant"`
}

// State is a thread's state: the turns kept and the summary of older ones.
type State struct {
	// Turns kept, oldest first.
	Turns []Turn `json:"turns,omitempty"`
	// Summary of the turns up to SummaryThrough, dropped from Turns.
	Summary        string `json:"summary,omitempty"`
	SummaryThrough int    `json:"summary_through,omitempty"`
	// Count is the number of turns taken so far.
	Count int `json:"count"`
	// Usage sums the tokens of the thread's LLM requests.
	Usage core.Usage `json:"usage"`
}

// Summarizer folds turns into the running summary and returns the new one.
type Summarizer func(ctx context.Context, m core.LLM, summary string, turns []Turn) (string, core.Usage, error)

// Config configures the kind.
type Config struct {
	// Name of the kind. Required.
	Name string
	// System is the system prompt of every turn.
	System string
	// LLM to ask; nil for the scope in the logic's context (wrap the kind
	// with core.Wrap granting core.ServiceLLM).
	LLM core.LLM
	// MaxTurns bounds the turns kept. Default 20.
	MaxTurns int
	// Keep is how many recent turns survive a summary. Default MaxTurns/2.
	Keep int
	// Summarize is the summarising policy. Default: ask the LLM with
	// SummaryPrompt (LLMSummary); DropOldest forgets instead.
	Summarize Summarizer
	// Retry is the node's retry policy for a failing turn.
	Retry actor.RetryPolicy
	// Coalesce gathers the streamed answer into fewer, larger
	// message.chunk records; the zero value is core's defaults (a chunk
	// waits at most 50ms, 2 KiB goes out at once), core.NoCoalesce one
	// record per chunk.
	Coalesce core.Coalesce
}

func (c *Config) defaults() error {
	if err := records.ValidateKind(c.Name); err != nil {
		return core.Errorf(core.CodeInvalid, "conversation", "name: %w", err)
	}
	if c.MaxTurns < 0 || c.Keep < 0 {
		return core.Errorf(core.CodeInvalid, "conversation", "MaxTurns and Keep must not be negative")
	}
	if c.MaxTurns == 0 {
		c.MaxTurns = 20
	}
	if c.Keep == 0 {
		c.Keep = c.MaxTurns / 2
	}
	if c.Keep >= c.MaxTurns {
		return core.Errorf(core.CodeInvalid, "conversation", "Keep %d must be below MaxTurns %d", c.Keep, c.MaxTurns)
	}
	if c.Summarize == nil {
		c.Summarize = LLMSummary
	}
	return nil
}

// LLMSummary is the default summarising policy: it asks m, with
// SummaryPrompt, to fold turns into summary.
func LLMSummary(ctx context.Context, m core.LLM, summary string, turns []Turn) (string, core.Usage, error) {
	var b strings.Builder
	if summary != "" {
		b.WriteString("Summary so far: " + summary + "\n\n")
	}
	for _, t := range turns {
		fmt.Fprintf(&b, "user: %s\nassistant: %s\n", t.User, t.Assistant)
	}
	res, err := m.Generate(ctx, core.Prompt(SummaryPrompt, b.String()))
	if err != nil {
		return "", core.Usage{}, err
	}
	return strings.TrimSpace(res.Text), res.Usage, nil
}

// DropOldest is the summarising policy that forgets: the oldest turns are
// dropped and the summary kept as it was (no LLM request).
func DropOldest(_ context.Context, _ core.LLM, summary string, _ []Turn) (string, core.Usage, error) {
	return summary, core.Usage{}, nil
}

// Kind returns the conversational kind.
func Kind(cfg Config) (actor.Kind[State], error) {
	if err := cfg.defaults(); err != nil {
		return actor.Kind[State]{}, err
	}
	return actor.Kind[State]{Name: cfg.Name, Retry: cfg.Retry, Logic: func(c *actor.Context, s State) (State, error) {
		rec := c.Record()
		switch rec.Type {
		case TypeMessage:
		case actor.TypeCancel:
			return s, nil
		default:
			return s, actor.UnknownType(rec.Type)
		}
		var msg Message
		if err := c.Decode(&msg); err != nil {
			return s, err
		}
		if strings.TrimSpace(msg.Text) == "" {
			return s, actor.Permanent(core.Errorf(core.CodeInvalid, "conversation", "the message has no text"))
		}
		m := cfg.LLM
		if m == nil {
			scope, err := core.From(c)
			if err != nil {
				return s, err
			}
			m = scope
		}
		return turn(c, cfg, m, s, msg.Text)
	}}, nil
}

// Request is the request a turn with text makes in state s.
func Request(system string, s State, text string) core.Request {
	var req core.Request
	sys := system
	if s.Summary != "" {
		sys = strings.TrimSpace(sys + "\n\nSummary of the earlier conversation: " + s.Summary)
	}
	if sys != "" {
		req.Messages = append(req.Messages, core.Message{Role: core.RoleSystem, Content: sys})
	}
	for _, t := range s.Turns {
		req.Messages = append(req.Messages,
			core.Message{Role: core.RoleUser, Content: t.User},
			core.Message{Role: core.RoleAssistant, Content: t.Assistant})
	}
	req.Messages = append(req.Messages, core.Message{Role: core.RoleUser, Content: text})
	return req
}

func turn(c *actor.Context, cfg Config, m core.LLM, s State, text string) (State, error) {
	var answer strings.Builder
	req := Request(cfg.System, s, text)
	final, err := core.CoalesceStream(c, cfg.Coalesce,
		func(ctx context.Context) iter.Seq2[core.Delta, error] { return m.Stream(ctx, req) },
		func(chunk string) error {
			answer.WriteString(chunk)
			return c.EmitNow(TypeChunk, Message{Text: chunk})
		})
	if err != nil {
		return s, err // retried; chunks already published are de-duplicated
	}
	usage := final.Usage
	s.Count++
	s.Usage = s.Usage.Add(usage)
	s.Turns = append(s.Turns, Turn{N: s.Count, User: text, Assistant: answer.String()})
	if len(s.Turns) > cfg.MaxTurns {
		old := s.Turns[:len(s.Turns)-cfg.Keep]
		sum, u, err := cfg.Summarize(c, m, s.Summary, old)
		if err != nil {
			return s, err
		}
		s.Usage = s.Usage.Add(u)
		s.Summary, s.SummaryThrough = sum, old[len(old)-1].N
		s.Turns = append([]Turn(nil), s.Turns[len(s.Turns)-cfg.Keep:]...)
	}
	rep := Reply{Turn: s.Count, Text: answer.String(), Usage: usage}
	if err := c.Emit(TypeReply, rep); err != nil {
		return s, err
	}
	if c.Record().Reply != "" {
		if err := c.Reply(TypeResult, rep); err != nil {
			return s, err
		}
	}
	return s, nil
}

// ErrSummarised: a branch point lies in turns already folded into the
// summary.
var ErrSummarised = errors.New("conversation: the turn is summarised already")

// Create creates thread ref with an empty history; an existing thread is kept.
func Create(ctx context.Context, c *actor.Client, ref records.Ref) error {
	if _, err := c.Create(ctx, ref, State{}); err != nil && !errors.Is(err, actor.ErrExists) {
		return err
	}
	return nil
}

// Send sends text to thread ref as one turn (process: the session id,
// empty for none) and returns the record as stored.
func Send(ctx context.Context, c *actor.Client, ref records.Ref, process, text string) (records.Record, error) {
	rec, err := records.New(TypeMessage, Message{Text: text})
	if err != nil {
		return records.Record{}, err
	}
	rec.Process = process
	return c.Send(ctx, ref, rec)
}

// BranchState returns s cut after turn upTo (all turns when upTo is 0 or
// beyond the last): what a branch starts from. A turn folded into the
// summary cannot be a branch point (ErrSummarised) unless it is the last
// summarised one.
func BranchState(s State, upTo int) (State, error) {
	if upTo <= 0 || upTo >= s.Count {
		return s, nil
	}
	if upTo < s.SummaryThrough {
		return State{}, fmt.Errorf("%w: turn %d (turns up to %d are in the summary)", ErrSummarised, upTo, s.SummaryThrough)
	}
	var kept []Turn
	for _, t := range s.Turns {
		if t.N <= upTo {
			kept = append(kept, t)
		}
	}
	s.Turns, s.Count = kept, upTo
	return s, nil
}

// Branch creates thread to as a copy of thread from with its history up to
// turn upTo (0: all of it as stored). If to exists already it is kept (so a
// step that branches may run again). A thread publishes a turn's reply just
// before it writes the state holding that turn, so Branch waits (until ctx
// ends) for from's state to hold turn upTo.
func Branch(ctx context.Context, c *actor.Client, from, to records.Ref, upTo int) error {
	var s State
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		doc, err := c.State(ctx, from)
		if err != nil {
			return err
		}
		s = State{}
		if err := doc.Decode(&s); err != nil {
			return err
		}
		if s.Count >= upTo {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("conversation: branch %s at turn %d: it has %d turns: %w", from, upTo, s.Count, context.Cause(ctx))
		}
	}
	b, err := BranchState(s, upTo)
	if err != nil {
		return err
	}
	if _, err := c.Create(ctx, to, b); err != nil && !errors.Is(err, actor.ErrExists) {
		return err
	}
	return nil
}

// Kill terminates thread ref; one terminated already is no error.
func Kill(ctx context.Context, c *actor.Client, ref records.Ref) error {
	_, err := c.Terminate(ctx, ref)
	if errors.Is(err, actor.ErrTerminated) {
		return nil
	}
	return err
}
