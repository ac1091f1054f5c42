package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/conversation"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// Names.
const (
	// WorkerKind is the kind of the worker threads.
	WorkerKind = "researcher"
	// Name is the orchestration's name.
	Name = "research"
)

// Prompts.
const (
	WorkerPrompt   = "You are a researcher. Answer the question briefly and factually."
	DecidePrompt   = "You supervise researchers. Given the goal and their answers so far, choose the next step: \"followup\" (ask the main researcher another question: message), \"branch\" (ask a copy of the main researcher, who remembers only the first answer, a different question: message), or \"finish\" (message: the final answer). Answer in JSON."
	FallbackFinish = "finish"
)

// The steps a decision may choose.
const (
	StepFollowup = "followup"
	StepBranch   = "branch"
	StepFinish   = "finish"
)

// Choice is what the model answers when it decides.
type Choice struct {
	Next    string `json:"next" jsonschema:"followup, branch or finish"`
	Message string `json:"message" jsonschema:"the question to ask, or the final answer"`
	Reason  string `json:"reason" jsonschema:"why, in one sentence"`
}

// Decision is one decision as the orchestration took it.
type Decision struct {
	Round int `json:"round"`
	// Choice is what the model answered (empty when it answered nothing usable).
	Choice Choice `json:"choice"`
	// Next is the step taken.
	Next string `json:"next"`
	// Fallback is set when the step is the fallback; Why says why.
	Fallback bool   `json:"fallback,omitempty"`
	Why      string `json:"why,omitempty"`
}

// Answer is one worker's reply.
type Answer struct {
	Thread   string `json:"thread"`
	Turn     int    `json:"turn"`
	Question string `json:"question"`
	Text     string `json:"text"`
	Error    string `json:"error,omitempty"`
}

// State is the orchestration's state; Status shows all of it as results.
type State struct {
	Goal      string     `json:"goal"`
	Main      string     `json:"main,omitempty"`
	Threads   []string   `json:"threads,omitempty"`
	Pending   Answer     `json:"pending"` // the next question and its thread
	Answers   []Answer   `json:"answers,omitempty"`
	Decisions []Decision `json:"decisions,omitempty"`
	Final     string     `json:"final,omitempty"`
	Log       []string   `json:"log,omitempty"`
}

// Config configures the example.
type Config struct {
	// MaxRounds bounds the decisions; the last one is finish. Default 4.
	MaxRounds int
}

// Worker returns the worker kind, its logic reaching the LLM of svc.
func Worker(svc *core.Services) (actor.Definition, error) {
	k, err := conversation.Kind(conversation.Config{Name: WorkerKind, System: WorkerPrompt, MaxTurns: 20})
	if err != nil {
		return nil, err
	}
	return core.Wrap(svc, core.Permissions{Services: []core.Service{core.ServiceLLM}}, k)
}

// Define returns the orchestration; its nodes may use the LLM of svc.
func Define(svc *core.Services, cfg Config) (supervisor.Definition, error) {
	if cfg.MaxRounds == 0 {
		cfg.MaxRounds = 4
	}
	if cfg.MaxRounds < 1 {
		return nil, fmt.Errorf("threads: MaxRounds must be at least 1")
	}
	type U = graph.Update[State]
	b := graph.New[State]()
	b.AddNode("open", func(ctx context.Context, s State) (U, error) {
		client, err := supervisor.ActorClient(ctx)
		if err != nil {
			return U{}, err
		}
		info, _ := graph.Info(ctx)
		main := records.Ref{Kind: WorkerKind, ID: info.Thread + "-main"}
		if err := conversation.Create(ctx, client, main); err != nil {
			return U{}, err // retried by the supervisor: create keeps a thread that exists
		}
		s.Main, s.Threads = main.String(), []string{main.String()}
		s.Pending = Answer{Thread: main.String(), Question: s.Goal}
		s.Log = append(s.Log, "open: created "+main.String())
		return graph.Replace(s).Goto("ask"), nil
	})
	b.AddNode("ask", func(ctx context.Context, s State) (U, error) {
		to, err := records.ParseRef(s.Pending.Thread)
		if err != nil {
			return U{}, graph.Permanent(err)
		}
		res, err := supervisor.Call(ctx, to, conversation.TypeMessage, conversation.Message{Text: s.Pending.Question})
		if err != nil {
			return U{}, err // the pause: the orchestration waits for the reply
		}
		a := s.Pending
		if res.Err != nil {
			a.Error = res.Err.Message // the worker's error feeds the decision
		} else {
			var rep conversation.Reply
			if err := res.Decode(&rep); err != nil {
				return U{}, graph.Permanent(err)
			}
			a.Turn, a.Text = rep.Turn, rep.Text
		}
		s.Answers = append(s.Answers, a)
		s.Log = append(s.Log, fmt.Sprintf("ask: %s turn %d answered", a.Thread, a.Turn))
		return graph.Replace(s).Goto("decide"), nil
	})
	b.AddNode("decide", func(ctx context.Context, s State) (U, error) {
		d := decide(ctx, s, cfg.MaxRounds)
		if ctx.Err() != nil {
			// The supervisor is stopping or the change ran out of time: no
			// decision (not a fallback); the change is applied again later.
			return U{}, context.Cause(ctx)
		}
		s.Decisions = append(s.Decisions, d)
		line := fmt.Sprintf("decide: round %d → %s", d.Round, d.Next)
		if d.Fallback {
			line += " (fallback: " + d.Why + ")"
		}
		s.Log = append(s.Log, line)
		supervisor.Logger(ctx).Info("decision", "round", d.Round, "choice", d.Choice.Next, "next", d.Next, "fallback", d.Fallback, "why", d.Why)
		switch d.Next {
		case StepFollowup:
			s.Pending = Answer{Thread: s.Main, Question: d.Choice.Message}
			return graph.Replace(s).Goto("ask"), nil
		case StepBranch:
			s.Pending = Answer{Question: d.Choice.Message}
			return graph.Replace(s).Goto("branch"), nil
		}
		s.Final = d.Choice.Message
		if d.Fallback || s.Final == "" {
			s.Final = lastAnswer(s)
		}
		return graph.Replace(s).Goto("finish"), nil
	})
	b.AddNode("branch", func(ctx context.Context, s State) (U, error) {
		client, err := supervisor.ActorClient(ctx)
		if err != nil {
			return U{}, err
		}
		main, err := records.ParseRef(s.Main)
		if err != nil {
			return U{}, graph.Permanent(err)
		}
		to := records.Ref{Kind: WorkerKind, ID: fmt.Sprintf("%s-b%d", main.ID, len(s.Decisions))}
		if err := conversation.Branch(ctx, client, main, to, 1); err != nil {
			return U{}, err
		}
		s.Threads = append(s.Threads, to.String())
		s.Pending.Thread = to.String()
		s.Log = append(s.Log, "branch: "+to.String()+" from "+s.Main+" after turn 1")
		return graph.Replace(s).Goto("ask"), nil
	})
	b.AddNode("finish", func(ctx context.Context, s State) (U, error) {
		client, err := supervisor.ActorClient(ctx)
		if err != nil {
			return U{}, err
		}
		for _, t := range s.Threads {
			ref, err := records.ParseRef(t)
			if err != nil {
				continue
			}
			if err := conversation.Kill(ctx, client, ref); err != nil {
				return U{}, err
			}
		}
		s.Log = append(s.Log, fmt.Sprintf("finish: killed %d thread(s)", len(s.Threads)))
		if err := unanswered(s); err != nil {
			return U{}, graph.Permanent(err)
		}
		return graph.Replace(s), nil
	})
	b.AddEdge(graph.START, "open").AddEdge("finish", graph.END)
	for _, n := range []string{"open", "ask", "branch"} {
		b.AddEdge(n, "decide") // the default; every node routes itself with Goto
	}
	b.AddEdge("decide", "finish")
	return supervisor.Define(supervisor.Spec[State]{
		Name: Name, Graph: b,
		Services: svc, Permissions: core.Permissions{Services: []core.Service{core.ServiceLLM}},
		Input: func(in json.RawMessage) (State, error) {
			var v struct {
				Goal string `json:"goal"`
			}
			if err := json.Unmarshal(in, &v); err != nil || strings.TrimSpace(v.Goal) == "" {
				return State{}, fmt.Errorf(`want {"goal": "..."}`)
			}
			return State{Goal: v.Goal}, nil
		},
	})
}

// decide asks the model for the next step, or falls back.
func decide(ctx context.Context, s State, maxRounds int) Decision {
	d := Decision{Round: len(s.Decisions) + 1}
	fallback := func(why string) Decision {
		d.Next, d.Fallback, d.Why = FallbackFinish, true, why
		return d
	}
	if d.Round >= maxRounds {
		return fallback(fmt.Sprintf("decision %d of at most %d", d.Round, maxRounds))
	}
	scope, err := core.From(ctx)
	if err != nil {
		return fallback(err.Error())
	}
	choice, err := core.GenerateObject[Choice](ctx, scope, core.Prompt(DecidePrompt, DecideInput(s)))
	if err != nil {
		return fallback("the model's answer is unusable: " + err.Error())
	}
	d.Choice = choice
	switch {
	case !slices.Contains([]string{StepFollowup, StepBranch, StepFinish}, choice.Next):
		return fallback(fmt.Sprintf("%q is not a step", choice.Next))
	case choice.Next != StepFinish && strings.TrimSpace(choice.Message) == "":
		return fallback(choice.Next + " without a message")
	}
	d.Next = choice.Next
	return d
}

// DecideInput is what the model reads when it decides.
func DecideInput(s State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n\nAnswers so far:\n", s.Goal)
	for _, a := range s.Answers {
		if a.Error != "" {
			fmt.Fprintf(&b, "- %s was asked %q and failed: %s\n", a.Thread, a.Question, a.Error)
			continue
		}
		fmt.Fprintf(&b, "- %s was asked %q and answered: %s\n", a.Thread, a.Question, a.Text)
	}
	return b.String()
}

// unanswered is why an orchestration that ends with no final answer
// failed: no thread answered (every answer an error: the model is down,
// say). A run with one answer, or a final message of the model's, has
// done its work.
func unanswered(s State) error {
	if s.Final != "" || len(s.Answers) == 0 {
		return nil
	}
	for _, a := range s.Answers {
		if a.Error == "" {
			return nil
		}
	}
	return fmt.Errorf("no thread answered the goal (%d question(s) asked): %s", len(s.Answers), s.Answers[len(s.Answers)-1].Error)
}

func lastAnswer(s State) string {
	for i := len(s.Answers) - 1; i >= 0; i-- {
		if s.Answers[i].Text != "" {
			return s.Answers[i].Text
		}
	}
	return ""
}
