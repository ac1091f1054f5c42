package plan_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/examples/plan"
	"github.com/effectors/effectors/graph"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeModel answers as the three agents would, telling them apart by their
// system prompt. The reviewer approves only plans that mention tests.
func fakeModel(alwaysRevise bool) func(llmtest.Request) llmtest.Reply {
	return func(r llmtest.Request) llmtest.Reply {
		switch r.System() {
		case plan.PlannerPrompt:
			if strings.Contains(r.LastUser(), "Reviewer feedback: add tests") {
				return llmtest.Reply{Text: "Here you go:\n<plan>1. write tests\n2. write code</plan>"}
			}
			return llmtest.Reply{Text: "<plan>1. write code</plan>"}
		case plan.ReviewerPrompt:
			if !alwaysRevise && strings.Contains(r.LastUser(), "tests") {
				return llmtest.Reply{Text: "<verdict>approve</verdict>"}
			}
			return llmtest.Reply{Text: "<verdict>revise</verdict><feedback>add tests</feedback>"}
		case plan.ExecutorPrompt:
			return llmtest.Reply{Text: "Step 1 done. Step 2 done.\n<summary>Wrote tests, then the code.</summary>\n<exit confidence=\"0.85\"/>"}
		}
		return llmtest.Reply{Status: 400}
	}
}

type env struct {
	client *actor.Client
	fake   *llmtest.Server
}

func setup(t *testing.T, cfg plan.Config, alwaysRevise bool) env {
	t.Helper()
	srv := bustest.NewServer(t)
	fake := llmtest.NewServer(t)
	fake.Respond(fakeModel(alwaysRevise))
	p, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake", APIKey: "test",
		Retry: llm.Retry{Attempts: 2, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := plan.Kinds(&core.Services{LLM: p}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := actor.NewNode(srv.Connect(t), actor.Options{ShutdownGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Host(defs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !node.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("node not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	client, err := actor.NewClient(t.Context(), srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Create(t.Context(), client, cfg); err != nil {
		t.Fatal(err)
	}
	return env{client: client, fake: fake}
}

func TestPlanReviewDo(t *testing.T) {
	cfg := plan.Config{Retry: actor.RetryPolicy{Attempts: 4, Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Multiplier: 2}}
	e := setup(t, cfg, false)
	// Three transient failures first: the provider retries once and gives up
	// (2 attempts), the node retries the planner's record, the provider
	// retries again and gets through.
	e.fake.Enqueue(llmtest.Reply{Status: 503}, llmtest.Reply{Status: 429}, llmtest.Reply{Status: 500})

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := plan.Run(ctx, e.client, cfg, "ship the feature")
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Result{Goal: "ship the feature", Plan: "1. write tests\n2. write code", Rounds: 2,
		Summary: "Wrote tests, then the code.", Confidence: 0.85}
	if res != want {
		t.Fatalf("result %+v\nwant   %+v", res, want)
	}
	// 3 failures + planner, reviewer (revise), planner, reviewer (approve), executor.
	reqs := e.fake.Requests()
	var systems []string
	for _, r := range reqs[3:] {
		systems = append(systems, strings.Fields(r.System())[3])
	}
	if len(reqs) != 8 || strings.Join(systems, " ") != "planner. reviewer. planner. reviewer. executor." {
		t.Fatalf("%d requests: %v", len(reqs), systems)
	}
	if reqs[0].Authorization != "Bearer test" || reqs[0].Model != "fake" {
		t.Fatalf("request %+v", reqs[0])
	}
}

func TestPlanRejected(t *testing.T) {
	cfg := plan.Config{MaxRounds: 2}
	e := setup(t, cfg, true)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := plan.Run(ctx, e.client, cfg, "ship it")
	if !errors.Is(err, plan.ErrRejected) || res.Rounds != 2 || !strings.Contains(res.Error, "add tests") {
		t.Fatalf("res %+v err %v", res, err)
	}
	if n := len(e.fake.Requests()); n != 4 { // planner, reviewer, planner, reviewer
		t.Fatalf("%d requests", n)
	}
}

func TestConfigInvalid(t *testing.T) {
	for _, cfg := range []plan.Config{
		{MaxRounds: -1},
		{Planner: actor.Document{Kind: "same", ID: "a"}.Ref(), Reviewer: actor.Document{Kind: "same", ID: "b"}.Ref()},
	} {
		if _, err := plan.Kinds(&core.Services{}, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// The same loop in-process on both runtimes: the reviewer sends the first
// plan back, a transient failure and an answer without its tags are retried
// by the node, and both runtimes end in the same state.
func TestLoopBothRuntimes(t *testing.T) {
	fake := llmtest.NewServer(t)
	model := fakeModel(false)
	var planCalls atomic.Int32
	fake.Respond(func(r llmtest.Request) llmtest.Reply {
		if r.System() == plan.PlannerPrompt && planCalls.Add(1)%3 == 1 {
			return llmtest.Reply{Text: "I forgot the tags"} // retried by the node
		}
		return model(r)
	})
	p, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	nodes, order := plan.Loop(p, 3)
	start := plan.LoopState{Job: plan.Job{Goal: "ship"}}
	fake.Enqueue(llmtest.Reply{Status: 503}) // the first call fails: retried with backoff
	seq, err := task.RunSequence(t.Context(), nodes, order, start)
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Result{Goal: "ship", Plan: "1. write tests\n2. write code", Rounds: 2, Summary: "Wrote tests, then the code.", Confidence: 0.85}
	if seq.Result != want || strings.Join(seq.Path, " ") != "plan review plan review do" {
		t.Fatalf("sequence: %+v path %v", seq.Result, seq.Path)
	}
	g, err := task.Graph(nodes, order)
	if err != nil {
		t.Fatal(err)
	}
	fake.Enqueue(llmtest.Reply{Status: 503})
	res, err := g.Invoke(t.Context(), "", graph.Replace(start))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.State, seq) {
		t.Fatalf("graph %+v\nsequence %+v", res.State, seq)
	}
	// Always sent back: after 2 rounds it goes to "do", which reports the refusal.
	fake.Respond(fakeModel(true))
	nodes, order = plan.Loop(p, 2)
	seq, err = task.RunSequence(t.Context(), nodes, order, start)
	if err != nil || seq.Approved || !strings.Contains(seq.Result.Error, "no plan approved after 2 rounds") {
		t.Fatalf("%+v %v", seq, err)
	}
	// A route that never ends is stopped.
	loop := map[string]task.Node[plan.LoopState]{"plan": nodes["plan"]}
	loop["plan"] = task.Node[plan.LoopState]{Agent: nodes["plan"].Agent, SelectInput: nodes["plan"].SelectInput,
		ApplyResult: nodes["plan"].ApplyResult, Route: func(plan.LoopState) (string, error) { return "plan", nil }}
	if _, err := task.RunSequence(t.Context(), loop, []string{"plan"}, start, task.MaxSteps(3)); !errors.Is(err, core.ErrSteps) {
		t.Fatalf("endless route: %v", err)
	}
}
