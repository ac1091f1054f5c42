package plan

import (
	"context"
	"strconv"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/task"
)

// LoopState is the state of the in-process plan → review → do loop.
type LoopState struct {
	Job
	Approved bool   `json:"approved"`
	Result   Result `json:"result"`
	// Path lists the nodes run, in order.
	Path []string `json:"path,omitempty"`
}

// Loop returns the plan → review → do loop as task nodes, for the
// sequential runtime (task.RunSequence) or the graph runtime (task.Graph),
// which give the same state: "plan" asks m with PlannerPrompt, "review" with
// ReviewerPrompt and routes back to "plan" until approved (at most maxRounds
// plans; then to "do" anyway, which reports that none was approved), "do"
// asks with ExecutorPrompt and ends. Each node retries a failed run (a
// provider error, an answer without its tags) with backoff.
func Loop(m core.LLM, maxRounds int) (map[string]task.Node[LoopState], []string) {
	if maxRounds < 1 {
		maxRounds = 3
	}
	retry := &actor.RetryPolicy{Attempts: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	// strict makes a run fail when its answer lacks the tags, so the node
	// retries it: another sample may have them.
	strict := func(system string, parse func(string) error) task.Agent {
		return task.Func(func(ctx context.Context, input string, start task.Start, out task.Output) error {
			res, err := m.Generate(ctx, core.Prompt(system, input))
			if err != nil {
				return err
			}
			if err := parse(res.Text); err != nil {
				return err
			}
			out.Event(task.UsageEvent(res.Usage))
			out.Text(res.Text)
			return nil
		})
	}
	path := func(s LoopState, n string) []string { return append(append([]string(nil), s.Path...), n) }
	nodes := map[string]task.Node[LoopState]{
		"plan": {
			Agent: strict(PlannerPrompt, func(t string) error { _, err := ParsePlan(t); return err }),
			SelectInput: func(s LoopState) (string, error) {
				user := "Goal: " + s.Goal
				if s.Feedback != "" {
					user += "\n\nPrevious plan:\n" + s.Plan + "\n\nReviewer feedback: " + s.Feedback
				}
				return user, nil
			},
			ApplyResult: func(s LoopState, r task.Result) (LoopState, error) {
				p, err := ParsePlan(r.Text)
				if err != nil {
					return s, err
				}
				s.Plan, s.Feedback, s.Round, s.Path = p, "", s.Round+1, path(s, "plan")
				return s, nil
			},
			Retry: retry,
		},
		"review": {
			Agent: strict(ReviewerPrompt, func(t string) error { _, err := ParseVerdict(t); return err }),
			SelectInput: func(s LoopState) (string, error) {
				return "Goal: " + s.Goal + "\n\nPlan:\n" + s.Plan, nil
			},
			ApplyResult: func(s LoopState, r task.Result) (LoopState, error) {
				v, err := ParseVerdict(r.Text)
				if err != nil {
					return s, err
				}
				s.Approved, s.Feedback, s.Path = v.Approve, v.Feedback, path(s, "review")
				return s, nil
			},
			Route: func(s LoopState) (string, error) {
				if !s.Approved && s.Round < maxRounds {
					return "plan", nil // sent back
				}
				return "do", nil
			},
			Retry: retry,
		},
		"do": {
			Agent: strict(ExecutorPrompt, func(t string) error { _, err := ParseOutcome(t); return err }),
			SelectInput: func(s LoopState) (string, error) {
				return "Goal: " + s.Goal + "\n\nApproved plan:\n" + s.Plan, nil
			},
			ApplyResult: func(s LoopState, r task.Result) (LoopState, error) {
				s.Path = path(s, "do")
				s.Result = Result{Goal: s.Goal, Plan: s.Plan, Rounds: s.Round}
				if !s.Approved {
					s.Result.Error = "no plan approved after " + strconv.Itoa(s.Round) + " rounds; last feedback: " + s.Feedback
					return s, nil
				}
				o, err := ParseOutcome(r.Text)
				if err != nil {
					return s, err
				}
				s.Result.Summary, s.Result.Confidence = o.Summary, o.Confidence
				return s, nil
			},
			Route: func(LoopState) (string, error) { return task.End, nil },
			Retry: retry,
		},
	}
	return nodes, []string{"plan", "review", "do"}
}
