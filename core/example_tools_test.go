package core_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
)

// A tool loop whose calls are approved: the hook allows small sums, denies
// negative numbers with a reason the model sees, and asks about the rest;
// the answer comes from Go through an Approvals.
func ExampleRunTools_approval() {
	fake := llmtest.Start() // any OpenAI-compatible endpoint: llm.ConfigFromEnv()
	defer fake.Close()
	fake.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`},
			{ID: "c2", Name: "add", Arguments: `{"a":-5,"b":2}`},
			{ID: "c3", Name: "add", Arguments: `{"a":500,"b":2}`},
		}},
		llmtest.Reply{Text: "3 and 502"},
	)
	m, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake"})
	tools := core.NewTools()
	add, _ := core.NewTool("add", "adds integers", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	})
	_ = tools.Register(add)

	canUseTool := func(_ context.Context, call core.ToolCall) (core.Decision, error) {
		args := string(call.Arguments)
		switch {
		case strings.Contains(args, "-"):
			return core.Deny("negative numbers are not allowed"), nil
		case strings.Contains(args, "500"):
			return core.Ask("a large sum"), nil
		}
		return core.Allow(), nil
	}
	approvals := core.NewApprovals()
	go func() { // a person, a policy service, a chat bot…
		a, _ := approvals.Next(context.Background())
		_ = approvals.Answer(a.ID, core.Allow())
	}()
	res, _, err := core.RunTools(context.Background(), m, tools, core.Prompt("", "add"), []string{"add"}, 4,
		core.WithCanUseTool(canUseTool), core.WithAsker(approvals.Ask),
		core.OnToolEvent(func(e core.ToolEvent) {
			switch {
			case e.Decision != nil:
				fmt.Println(e.Type, e.Call.ID, e.Decision.Verdict)
			case e.Type == core.EventToolResult:
				fmt.Println(e.Type, e.Call.ID, e.Result)
			default:
				fmt.Println(e.Type, e.Call.ID)
			}
		}))
	fmt.Println(res.Text, err, res.Usage.Total() > 0)
	// Output:
	// tool.call c1
	// tool.result c1 3
	// tool.call c2
	// tool.decision c2 deny
	// tool.result c2 denied: negative numbers are not allowed
	// tool.call c3
	// tool.approval c3
	// tool.decision c3 allow
	// tool.result c3 502
	// 3 and 502 <nil> true
}

// Structured output streamed: the object grows as its JSON arrives.
func ExampleStreamObject() {
	fake := llmtest.Start()
	defer fake.Close()
	fake.Enqueue(llmtest.Reply{Chunks: []string{`{"title":"Queues`, ` and logs","tags":["nats"`, `,"go"]}`}})
	m, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake"})

	type Article struct {
		Title string   `json:"title"`
		Tags  []string `json:"tags"`
	}
	for d, err := range core.StreamObject[Article](context.Background(), m, core.Prompt("", "an article")) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("final=%v %q %v\n", d.Final, d.Partial.Title, d.Partial.Tags)
	}
	// Output:
	// final=false "Queues" []
	// final=false "Queues and logs" [nats]
	// final=false "Queues and logs" [nats go]
	// final=true "Queues and logs" [nats go]
}
