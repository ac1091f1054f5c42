package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/records"
)

// Record types of the protocol.
const (
	TypeGoal    = "goal"    // → planner: a new job
	TypeRevise  = "revise"  // reviewer → planner: write the plan again
	TypePlan    = "plan"    // planner → reviewer
	TypeDo      = "do"      // reviewer → executor: an approved plan
	TypeAbandon = "abandon" // reviewer → executor: no plan was approved
	TypeDone    = "done"    // executor's outbox: the job's result
	TypeFailed  = "failed"  // executor's outbox: the job failed
)

// ErrRejected: the reviewer sent the plan back MaxRounds times.
var ErrRejected = errors.New("plan: no plan was approved")

// System prompts of the three agents.
const (
	PlannerPrompt = "You are the planner. Write a short numbered plan for the goal. " +
		"If reviewer feedback is given, revise the previous plan to address it. " +
		"Answer with the plan inside <plan>...</plan> and nothing else."
	ReviewerPrompt = "You are the reviewer. Judge whether the plan achieves the goal safely and completely. " +
		"Answer <verdict>approve</verdict>, or <verdict>revise</verdict> followed by " +
		"<feedback>what to change</feedback>."
	ExecutorPrompt = "You are the executor. Carry out the approved plan step by step and report what you did. " +
		"End with <summary>one paragraph</summary> and <exit confidence=\"X\"/> where X in [0,1] " +
		"is your confidence that the goal is achieved."
)

// Config names the three effectors and the review limit.
type Config struct {
	Planner, Reviewer, Executor records.Ref
	// MaxRounds is how many plans the planner may write for one job. Default 3.
	MaxRounds int
	// Retry is the node's retry policy for the agents' logic. Default 5
	// attempts from 200ms doubling.
	Retry actor.RetryPolicy
}

func (c *Config) defaults() error {
	if c.Planner == (records.Ref{}) {
		c.Planner = records.Ref{Kind: "planner", ID: "main"}
	}
	if c.Reviewer == (records.Ref{}) {
		c.Reviewer = records.Ref{Kind: "reviewer", ID: "main"}
	}
	if c.Executor == (records.Ref{}) {
		c.Executor = records.Ref{Kind: "executor", ID: "main"}
	}
	for _, r := range []records.Ref{c.Planner, c.Reviewer, c.Executor} {
		if err := records.ValidateKind(r.Kind); err != nil {
			return err
		}
		if err := records.ValidateID(r.ID); err != nil {
			return err
		}
	}
	if c.Planner.Kind == c.Reviewer.Kind || c.Planner.Kind == c.Executor.Kind || c.Reviewer.Kind == c.Executor.Kind {
		return fmt.Errorf("plan: planner, reviewer and executor need three different kinds")
	}
	if c.MaxRounds < 0 {
		return fmt.Errorf("plan: MaxRounds must not be negative")
	}
	if c.MaxRounds == 0 {
		c.MaxRounds = 3
	}
	if c.Retry.IsZero() {
		c.Retry = actor.RetryPolicy{Attempts: 5, Backoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second, Multiplier: 2}
	}
	return nil
}

// Job travels from agent to agent.
type Job struct {
	Goal     string `json:"goal"`
	Plan     string `json:"plan,omitempty"`
	Feedback string `json:"feedback,omitempty"`
	// Round is the number of plans written so far.
	Round int `json:"round"`
}

// Result is the payload of the executor's done and failed records.
type Result struct {
	Goal       string  `json:"goal"`
	Plan       string  `json:"plan,omitempty"`
	Rounds     int     `json:"rounds"`
	Summary    string  `json:"summary,omitempty"`
	Confidence float64 `json:"confidence"`
	Error      string  `json:"error,omitempty"`
}

// Stats is each agent's state: how many records it handled.
type Stats struct {
	Handled int `json:"handled"`
}

// Kinds returns the three kinds, wrapped so that their logic reaches the
// LLM of svc (and nothing else: their permissions grant the LLM only).
func Kinds(svc *core.Services, cfg Config) ([]actor.Definition, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	perms := core.Permissions{Services: []core.Service{core.ServiceLLM}}
	var defs []actor.Definition
	for _, k := range []actor.Kind[Stats]{
		{Name: cfg.Planner.Kind, Logic: planner(cfg), Retry: cfg.Retry},
		{Name: cfg.Reviewer.Kind, Logic: reviewer(cfg), Retry: cfg.Retry},
		{Name: cfg.Executor.Kind, Logic: executor(cfg), Retry: cfg.Retry},
	} {
		w, err := core.Wrap(svc, perms, k)
		if err != nil {
			return nil, err
		}
		defs = append(defs, w)
	}
	return defs, nil
}

// ask sends the agent's prompt to the LLM of the services in ctx.
func ask(ctx *actor.Context, system, user string) (string, error) {
	scope, err := core.From(ctx)
	if err != nil {
		return "", err
	}
	res, err := scope.Generate(ctx, core.Prompt(system, user))
	if err != nil {
		return "", err
	}
	return res.Text, nil
}

func planner(cfg Config) actor.Logic[Stats] {
	return func(ctx *actor.Context, s Stats) (Stats, error) {
		if t := ctx.Record().Type; t != TypeGoal && t != TypeRevise {
			return s, actor.UnknownType(t)
		}
		var job Job
		if err := ctx.Decode(&job); err != nil {
			return s, err
		}
		user := "Goal: " + job.Goal
		if job.Feedback != "" {
			user += "\n\nPrevious plan:\n" + job.Plan + "\n\nReviewer feedback: " + job.Feedback
		}
		answer, err := ask(ctx, PlannerPrompt, user)
		if err != nil {
			return s, err
		}
		p, err := ParsePlan(answer)
		if err != nil {
			return s, err // another sample may have the tag: retried with backoff
		}
		job.Plan, job.Feedback, job.Round = p, "", job.Round+1
		s.Handled++
		return s, ctx.Send(cfg.Reviewer, TypePlan, job)
	}
}

func reviewer(cfg Config) actor.Logic[Stats] {
	return func(ctx *actor.Context, s Stats) (Stats, error) {
		if t := ctx.Record().Type; t != TypePlan {
			return s, actor.UnknownType(t)
		}
		var job Job
		if err := ctx.Decode(&job); err != nil {
			return s, err
		}
		answer, err := ask(ctx, ReviewerPrompt, "Goal: "+job.Goal+"\n\nPlan:\n"+job.Plan)
		if err != nil {
			return s, err
		}
		v, err := ParseVerdict(answer)
		if err != nil {
			return s, err
		}
		s.Handled++
		switch {
		case v.Approve:
			return s, ctx.Send(cfg.Executor, TypeDo, job)
		case job.Round >= cfg.MaxRounds:
			job.Feedback = v.Feedback
			return s, ctx.Send(cfg.Executor, TypeAbandon, job)
		}
		job.Feedback = v.Feedback
		return s, ctx.Send(cfg.Planner, TypeRevise, job)
	}
}

func executor(cfg Config) actor.Logic[Stats] {
	return func(ctx *actor.Context, s Stats) (Stats, error) {
		var job Job
		switch t := ctx.Record().Type; t {
		case TypeAbandon:
			if err := ctx.Decode(&job); err != nil {
				return s, err
			}
			s.Handled++
			return s, ctx.Emit(TypeFailed, Result{Goal: job.Goal, Plan: job.Plan, Rounds: job.Round,
				Error: fmt.Sprintf("no plan approved after %d rounds; last feedback: %s", job.Round, job.Feedback)})
		case TypeDo:
		default:
			return s, actor.UnknownType(t)
		}
		if err := ctx.Decode(&job); err != nil {
			return s, err
		}
		answer, err := ask(ctx, ExecutorPrompt, "Goal: "+job.Goal+"\n\nApproved plan:\n"+job.Plan)
		if err != nil {
			return s, err
		}
		out, err := ParseOutcome(answer)
		if err != nil {
			return s, err
		}
		s.Handled++
		return s, ctx.Emit(TypeDone, Result{Goal: job.Goal, Plan: job.Plan, Rounds: job.Round,
			Summary: out.Summary, Confidence: out.Confidence})
	}
}

// Create creates the three effectors; existing ones are kept.
func Create(ctx context.Context, c *actor.Client, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	for _, r := range []records.Ref{cfg.Planner, cfg.Reviewer, cfg.Executor} {
		if _, err := c.Create(ctx, r, nil); err != nil && !errors.Is(err, actor.ErrExists) {
			return fmt.Errorf("plan: create %s: %w", r, err)
		}
	}
	return nil
}

// Run sends goal to the planner as a new job and waits until the executor
// reports its outcome, or ctx ends. A job whose plans were all sent back
// returns the result with ErrRejected.
func Run(ctx context.Context, c *actor.Client, cfg Config, goal string) (Result, error) {
	if err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(goal) == "" {
		return Result{}, fmt.Errorf("plan: the goal is empty")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outputs, err := c.Subscribe(ctx, cfg.Executor)
	if err != nil {
		return Result{}, err
	}
	rec, err := records.New(TypeGoal, Job{Goal: goal})
	if err != nil {
		return Result{}, err
	}
	rec.Process = records.NewID()
	if _, err := c.Send(ctx, cfg.Planner, rec); err != nil {
		return Result{}, err
	}
	for out, err := range outputs {
		if err != nil || out.Process != rec.Process {
			continue
		}
		var res Result
		switch out.Type {
		case TypeDone:
			err := out.Decode(&res)
			return res, err
		case TypeFailed:
			if err := out.Decode(&res); err != nil {
				return res, err
			}
			return res, fmt.Errorf("%w: %s", ErrRejected, res.Error)
		}
	}
	return Result{}, fmt.Errorf("plan: job %s: %w", rec.Process, context.Cause(ctx))
}
