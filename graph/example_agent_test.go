package graph_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/effectors/effectors/graph"
)

// The small agent graph of docs/graph.md (side by side with LangGraph.js):
// the agent asks a model, which either calls a tool or answers.
func Example_agent() {
	type reply struct{ Tool, Text string }
	model := func(ctx context.Context, msgs []string) (reply, error) { // a stand-in for an LLM
		if len(msgs) < 2 {
			return reply{Tool: "search " + msgs[0]}, nil
		}
		return reply{Text: "found: " + msgs[len(msgs)-1]}, nil
	}
	runTool := func(ctx context.Context, call string) (string, error) { return strings.ToUpper(call), nil }

	// --- as in docs/graph.md ---
	type State struct {
		Messages []string `json:"messages"`
		Answer   string   `json:"answer"`
	}
	b := graph.New[State]()
	messages := graph.FieldOf[[]string](b, "messages", graph.Append[string])
	answer := graph.FieldOf[string](b, "answer")
	b.AddNode("agent", func(ctx context.Context, s State) (graph.Update[State], error) {
		r, err := model(ctx, s.Messages)
		if r.Tool != "" {
			return graph.Updates(messages.Set([]string{r.Tool})).Goto("tool"), err
		}
		return graph.Updates(answer.Set(r.Text)).Goto(graph.END), err
	})
	b.AddNode("tool", func(ctx context.Context, s State) (graph.Update[State], error) {
		out, err := runTool(ctx, s.Messages[len(s.Messages)-1])
		return graph.Updates(messages.Set([]string{out})), err
	})
	b.AddEdge(graph.START, "agent").AddEdge("tool", "agent")
	g, err := b.Compile()
	// --- end ---
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := g.Invoke(context.Background(), "", graph.Updates(messages.Set([]string{"otters"})))
	fmt.Println(res.State.Answer, err)
	// Output: found: SEARCH OTTERS <nil>
}
