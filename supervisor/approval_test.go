package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/supervisor"
)

// toolState is the state of an orchestration whose node runs a tool loop
// and takes tool approvals from the orchestration's input.
type toolState struct {
	Goal    string                   `json:"goal"`
	Pause   *core.Pause              `json:"pause,omitempty"`
	Answers map[string]core.Decision `json:"answers,omitempty"`
	Final   string                   `json:"final,omitempty"`
}

// toolApprovalDef: node "agent" runs the tool loop with the orchestration's
// services; a call that needs an approval pauses the loop, the pause goes in
// the state and node "approve" waits for the orchestration's input (WAITING,
// the approval as prompt); the answer resumes the loop where it stopped,
// without asking the model again.
func toolApprovalDef(t *testing.T, svc *core.Services) supervisor.Definition {
	t.Helper()
	type U = graph.Update[toolState]
	b := graph.New[toolState]()
	b.AddNode("agent", func(ctx context.Context, s toolState) (U, error) {
		scope, err := core.From(ctx)
		if err != nil {
			return U{}, err
		}
		opts := []core.ToolOption{core.WithCanUseTool(func(context.Context, core.ToolCall) (core.Decision, error) {
			return core.Ask("every call is checked by a person"), nil
		})}
		if s.Pause != nil {
			opts = append(opts, core.ResumeFrom(*s.Pause, s.Answers))
		}
		res, _, err := scope.RunTools(ctx, core.Prompt("", s.Goal), []string{"add"}, 4, opts...)
		var p *core.Pause
		if errors.As(err, &p) {
			s.Pause = p
			return graph.Replace(s).Goto("approve"), nil
		}
		if err != nil {
			return U{}, graph.Permanent(err)
		}
		s.Final, s.Pause = res.Text, nil
		return graph.Replace(s).Goto(graph.END), nil
	})
	b.AddNode("approve", func(ctx context.Context, s toolState) (U, error) {
		var d core.Decision
		if err := supervisor.AwaitInput(ctx, s.Pause.Approval, &d); err != nil {
			return U{}, err
		}
		if s.Answers == nil {
			s.Answers = map[string]core.Decision{}
		}
		s.Answers[s.Pause.Approval.ID] = d
		return graph.Replace(s).Goto("agent"), nil
	})
	b.AddEdge(graph.START, "agent").AddEdge("agent", graph.END).AddEdge("approve", "agent")
	def, err := supervisor.Define(supervisor.Spec[toolState]{Name: "tooluse", Graph: b, Services: svc,
		Permissions: core.Permissions{Services: []core.Service{core.ServiceLLM, core.ServiceTools}, Tools: []string{"add"}}})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestToolApprovalByInput runs on one mailbox stream and on stream groups
// (the orchestration's records and status in its group's streams).
func TestToolApprovalByInput(t *testing.T) {
	t.Parallel()
	t.Run("one stream", func(t *testing.T) {
		t.Parallel()
		toolApprovalByInput(t, bustest.NewServer(t).Connect(t))
	})
	t.Run("stream groups", func(t *testing.T) {
		t.Parallel()
		srv := bustest.NewServer(t)
		srv.MapPartitions(t, 8)
		toolApprovalByInput(t, srv.Connect(t, bus.Config{Partitions: 8, Groups: 4}))
	})
}

func toolApprovalByInput(t *testing.T, conn *bus.Conn) {
	fake := llmtest.NewServer(t)
	p, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "m", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tools := core.NewTools()
	add, err := core.NewTool("add", "adds", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.Register(add); err != nil {
		t.Fatal(err)
	}
	startSupervisor(t, conn, toolApprovalDef(t, &core.Services{LLM: p, Tools: tools}))
	c := newClient(t, conn)
	ctx := ctxT(t)
	fake.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`}}},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "add", Arguments: `{"a":3,"b":4}`}}},
		llmtest.Reply{Text: "3, and no 7"},
	)
	id, err := c.Start(ctx, "tooluse", map[string]string{"goal": "add"})
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []core.Decision{core.Allow(), core.Deny("not today")} {
		o := waitStatus(t, c, id, supervisor.StatusWaiting)
		var a core.Approval
		if err := json.Unmarshal(o.Prompt, &a); err != nil || a.Call.Name != "add" || a.Reason != "every call is checked by a person" {
			t.Fatalf("prompt %s: %v", o.Prompt, err)
		}
		if _, err := c.Input(ctx, id, answer); err != nil {
			t.Fatal(err)
		}
		// Wait until the input is taken (the orchestration leaves WAITING for this approval).
		deadline := time.Now().Add(20 * time.Second)
		for {
			o, err = c.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != supervisor.StatusWaiting || !strings.Contains(string(o.Prompt), a.ID) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	o := waitStatus(t, c, id, supervisor.StatusCompleted)
	var s toolState
	if err := json.Unmarshal(o.Results, &s); err != nil || s.Final != "3, and no 7" {
		t.Fatalf("results %s: %v", o.Results, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3 (a resumed loop does not ask again)", len(reqs))
	}
	if m := reqs[2].Messages; m[len(m)-1].Text() != "denied: not today" || m[2].Text() != "3" {
		t.Fatalf("last request %+v", m)
	}
}
