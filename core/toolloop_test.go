package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
)

func calcScope(t *testing.T, srv *llmtest.Server, reg prometheus.Registerer) *core.Scope {
	t.Helper()
	ts := core.NewTools()
	if err := ts.Register(addTool(t)); err != nil {
		t.Fatal(err)
	}
	m, err := core.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	svc := &core.Services{LLM: provider(t, srv), Tools: ts, Metrics: m}
	return svc.Scope("calc", core.Permissions{Services: []core.Service{core.ServiceLLM, core.ServiceTools}, Tools: []string{"add"}})
}

func eventTypes(evs []core.ToolEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

// The hook allows, denies (the model sees the reason) and asks; an Approvals
// answers the ask from Go; every step is an event; the text is streamed and
// the usage of all model calls summed and counted per kind.
func TestToolApproval(t *testing.T) {
	srv := llmtest.NewServer(t)
	reg := prometheus.NewRegistry()
	scope := calcScope(t, srv, reg)
	srv.Enqueue(
		llmtest.Reply{Text: "adding", ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`},
			{ID: "c2", Name: "add", Arguments: `{"a":100,"b":1}`},
			{ID: "c3", Name: "add", Arguments: `{"a":-1,"b":1}`},
		}},
		llmtest.Reply{Text: "done: 3 and 101"},
	)
	can := func(_ context.Context, c core.ToolCall) (core.Decision, error) {
		switch {
		case strings.Contains(string(c.Arguments), "100"):
			return core.Ask("big numbers"), nil
		case strings.Contains(string(c.Arguments), "-1"):
			return core.Deny("no negative numbers"), nil
		}
		return core.Allow(), nil
	}
	approvals := core.NewApprovals()
	answered := make(chan error, 1)
	go func() {
		a, err := approvals.Next(t.Context())
		if err == nil && (a.ID != "c2" || a.Reason != "big numbers" || len(approvals.Pending()) != 1) {
			err = errors.New("unexpected approval")
		}
		if err == nil {
			err = approvals.Answer(a.ID, core.Allow())
		}
		answered <- err
	}()
	var evs []core.ToolEvent
	var text strings.Builder
	res, msgs, err := scope.RunTools(t.Context(), core.Prompt("", "add things"), []string{"add"}, 4,
		core.WithCanUseTool(can), core.WithAsker(approvals.Ask),
		core.OnToolEvent(func(e core.ToolEvent) { evs = append(evs, e) }),
		core.StreamTo(func(s string) { text.WriteString(s) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if res.Text != "done: 3 and 101" || text.String() != "addingdone: 3 and 101" {
		t.Fatalf("res %+v text %q", res, text.String())
	}
	want := "tool.call tool.result tool.call tool.approval tool.decision tool.result tool.call tool.decision tool.result"
	if got := eventTypes(evs); got != want {
		t.Fatalf("events %s\nwant   %s", got, want)
	}
	if evs[5].Result != "101" || evs[8].Result != "denied: no negative numbers" || evs[4].Decision.Verdict != core.VerdictAllow {
		t.Fatalf("events %+v", evs)
	}
	// The model saw the denial.
	m := srv.Requests()[1].Messages
	if len(m) != 5 || m[4].Text() != "denied: no negative numbers" || m[2].Text() != "3" || m[3].Text() != "101" {
		t.Fatalf("second request %+v", m)
	}
	if len(msgs) != 6 {
		t.Fatalf("%d messages", len(msgs))
	}
	// Usage: both calls summed; counted for kind calc.
	reqs := srv.Requests()
	in := llmtest.PromptTokens(reqs[0]) + llmtest.PromptTokens(reqs[1])
	out := llmtest.Tokens("adding") + 3 + llmtest.Tokens("done: 3 and 101") // each call's arguments are one word
	if res.Usage != (core.Usage{Input: in, Output: out}) {
		t.Fatalf("usage %+v, want %d in %d out", res.Usage, in, out)
	}
	if got := value(t, tokens(t, reg, "calc", "input")); got != float64(in) {
		t.Fatalf("input tokens metric %v, want %d", got, in)
	}
	if got := value(t, tokens(t, reg, "calc", "output")); got != float64(out) {
		t.Fatalf("output tokens metric %v, want %d", got, out)
	}
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func tokens(t *testing.T, reg *prometheus.Registry, kind, dir string) prometheus.Counter {
	t.Helper()
	m, err := core.NewMetrics(reg) // registering again reuses the collector
	if err != nil {
		t.Fatal(err)
	}
	return core.TokenCounter(m, kind, dir)
}

// Without an Asker an ask pauses the loop; the pause resumes with the answer.
func TestToolPauseResume(t *testing.T) {
	srv := llmtest.NewServer(t)
	scope := calcScope(t, srv, nil)
	srv.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{
		{ID: "c1", Name: "add", Arguments: `{"a":1,"b":1}`},
		{ID: "c2", Name: "add", Arguments: `{"a":2,"b":2}`},
	}})
	can := func(_ context.Context, c core.ToolCall) (core.Decision, error) {
		if c.ID == "c2" {
			return core.Ask("check"), nil
		}
		return core.Allow(), nil
	}
	_, _, err := scope.RunTools(t.Context(), core.Prompt("", "x"), []string{"add"}, 3, core.WithCanUseTool(can))
	var p *core.Pause
	if !errors.Is(err, core.ErrApproval) || !errors.As(err, &p) || p.Approval.ID != "c2" || p.Step != 1 || len(p.Messages) != 3 {
		t.Fatalf("err %v pause %+v", err, p)
	}
	// Resumed with a denial: c1's result is kept, c2 is denied, the model answers.
	srv.Enqueue(llmtest.Reply{Text: "ok"})
	res, msgs, err := scope.RunTools(t.Context(), core.Request{}, []string{"add"}, 3, core.WithCanUseTool(can),
		core.ResumeFrom(*p, map[string]core.Decision{"c2": core.Deny("not now")}))
	if err != nil || res.Text != "ok" || len(msgs) != 5 || msgs[3].Content != "denied: not now" || msgs[2].Content != "2" {
		t.Fatalf("res %+v msgs %+v err %v", res, msgs, err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2", n)
	}
	// Cancelling while an Asker waits ends the loop with CodeCancelled.
	srv.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "add", Arguments: `{"a":1,"b":1}`}}})
	ctx, cancel := context.WithCancel(t.Context())
	approvals := core.NewApprovals()
	go func() {
		if _, err := approvals.Next(ctx); err == nil {
			cancel()
		}
	}()
	_, _, err = scope.RunTools(ctx, core.Prompt("", "x"), []string{"add"}, 3, core.WithCanUseTool(can), core.WithAsker(approvals.Ask))
	cancel()
	if !errors.Is(err, core.ErrCancelled) || len(approvals.Pending()) != 0 {
		t.Fatalf("err %v pending %v", err, approvals.Pending())
	}
	if err := approvals.Answer("c2", core.Allow()); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("answer after the end: %v", err)
	}
}
