package task_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
)

// A tool-using agent run in the background: its text streams, each tool
// call, approval, decision and result is an event, and the approval is
// answered by the caller of Collect.
func ExampleToolAgent() {
	fake := llmtest.Start()
	defer fake.Close()
	fake.Enqueue(
		llmtest.Reply{Text: "Looking. ", ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "rm", Arguments: `{"path":"/tmp/x"}`}}},
		llmtest.Reply{Text: "Removed."},
	)
	m, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake"})
	tools := core.NewTools()
	rm, _ := core.NewTool("rm", "removes a file", func(_ context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		return "removed " + in.Path, nil
	})
	_ = tools.Register(rm)

	agent := task.ToolAgent{LLM: m, Tools: tools, Names: []string{"rm"},
		CanUseTool: func(context.Context, core.ToolCall) (core.Decision, error) { return core.Ask("it deletes"), nil }}
	res, err := task.Collect(context.Background(), agent, "clean up", task.Approve(func(_ context.Context, a core.Approval) (core.Decision, error) {
		fmt.Printf("asked about %s %s: %s\n", a.Call.Name, a.Call.Arguments, a.Reason)
		return core.Allow(), nil
	}))
	var types []string
	for _, e := range res.Events {
		types = append(types, e.Type)
	}
	fmt.Println(res.Text, err)
	fmt.Println(strings.Join(types, " "))
	// Output:
	// asked about rm {"path":"/tmp/x"}: it deletes
	// Looking. Removed. <nil>
	// tool.call tool.approval tool.decision tool.result llm.usage
}

// The sequential runtime routes: a reviewer sends the draft back until it
// is long enough, then the run ends; the graph runtime (task.Graph) runs the
// same nodes the same way.
func ExampleRunSequence() {
	type S struct {
		Draft  string
		Rounds int
	}
	write := task.Func(func(_ context.Context, in string, _ task.Start, out task.Output) error {
		out.Text(in + "!")
		return nil
	})
	nodes := map[string]task.Node[S]{
		"write": {Agent: write,
			SelectInput: func(s S) (string, error) { return s.Draft, nil },
			ApplyResult: func(s S, r task.Result) (S, error) { s.Draft, s.Rounds = r.Text, s.Rounds+1; return s, nil }},
		"review": {Agent: task.Func(func(context.Context, string, task.Start, task.Output) error { return nil }),
			SelectInput: func(s S) (string, error) { return s.Draft, nil },
			ApplyResult: func(s S, _ task.Result) (S, error) { return s, nil },
			Route: func(s S) (string, error) {
				if len(s.Draft) < 6 {
					return "write", nil // sent back
				}
				return task.End, nil
			}},
	}
	s, err := task.RunSequence(context.Background(), nodes, []string{"write", "review"}, S{Draft: "hi"})
	fmt.Println(s.Draft, s.Rounds, err)
	// Output: hi!!!! 4 <nil>
}
