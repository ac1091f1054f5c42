package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/effectors/effectors/graph"
)

type essay struct {
	Topic  string   `json:"topic"`
	Notes  []string `json:"notes"`
	Draft  string   `json:"draft"`
	Editor string   `json:"editor"`
}

// Two researchers run in the same super-step and both append to Notes (a
// reduced field); the writer runs in the next step.
func Example() {
	b := graph.New[essay]()
	notes := graph.Reduced(b, "notes", func(s *essay) *[]string { return &s.Notes }, graph.Append[string])
	draft := graph.Plain(b, "draft", func(s *essay) *string { return &s.Draft })
	research := func(source string) graph.NodeFunc[essay] {
		return func(ctx context.Context, s essay) (graph.Update[essay], error) {
			return graph.Updates(notes.Set([]string{source + " on " + s.Topic})), nil
		}
	}
	b.AddNode("library", research("books"))
	b.AddNode("web", research("articles"))
	b.AddNode("write", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		return graph.Updates(draft.Set(strings.Join(s.Notes, "; "))), nil
	})
	b.AddEdge(graph.START, "library").AddEdge(graph.START, "web")
	b.AddEdge("library", "write").AddEdge("web", "write").AddEdge("write", graph.END)
	g, err := b.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := g.Invoke(context.Background(), "", graph.Replace(essay{Topic: "otters"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Step, "steps:", res.State.Draft)
	// Output: 2 steps: books on otters; articles on otters
}

// A node asks for outside input with Interrupt; Resume runs it again with
// the answer.
func ExampleInterrupt() {
	b := graph.New[essay]()
	editor := graph.Plain(b, "editor", func(s *essay) *string { return &s.Editor })
	b.AddNode("review", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		var name string
		ok, err := graph.ResumeInput(ctx, &name)
		if err != nil {
			return graph.Update[essay]{}, err
		}
		if !ok {
			return graph.Update[essay]{}, graph.Interrupt("who reviews " + s.Topic + "?")
		}
		return graph.Updates(editor.Set(name)), nil
	})
	b.AddEdge(graph.START, "review").AddEdge("review", graph.END)
	g, err := b.Compile(graph.WithCheckpointer(graph.NewMemorySaver(0)))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, err := g.Invoke(ctx, "essay-1", graph.Replace(essay{Topic: "otters"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	var question string
	_ = res.Interrupts[0].Decode(&question)
	fmt.Println("paused at", res.Interrupts[0].Node+":", question)

	res, err = g.Resume(ctx, "essay-1", "Grace")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("editor:", res.State.Editor)
	// Output:
	// paused at review: who reviews otters?
	// editor: Grace
}

// A fan-out: one run of "summarize" per topic, reduced in Send order.
func ExampleBuilder_AddSends() {
	b := graph.New[essay]()
	notes := graph.Reduced(b, "notes", func(s *essay) *[]string { return &s.Notes }, graph.Append[string])
	b.AddNode("plan", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		return graph.Update[essay]{}, nil
	})
	b.AddNode("summarize", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		return graph.Updates(notes.Set([]string{strings.ToUpper(s.Topic)})), nil
	})
	b.AddEdge(graph.START, "plan")
	b.AddSends("plan", func(ctx context.Context, s essay) ([]graph.Send[essay], error) {
		var sends []graph.Send[essay]
		for _, t := range strings.Split(s.Topic, ",") {
			sends = append(sends, graph.Send[essay]{Node: "summarize", State: essay{Topic: t}})
		}
		return sends, nil
	})
	g, err := b.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := g.Invoke(context.Background(), "", graph.Replace(essay{Topic: "otters,beavers,voles"}))
	fmt.Println(res.State.Notes, err)
	// Output: [OTTERS BEAVERS VOLES] <nil>
}

// The recursion limit stops a graph that never reaches END.
func ExampleWithRecursionLimit() {
	b := graph.New[essay]()
	b.AddNode("again", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		return graph.Update[essay]{}, nil
	})
	b.AddEdge(graph.START, "again").AddEdge("again", "again")
	g, _ := b.Compile(graph.WithRecursionLimit(5))
	_, err := g.Invoke(context.Background(), "", graph.Update[essay]{})
	var re *graph.RecursionError
	fmt.Println(errors.As(err, &re), re.Limit)
	// Output: true 5
}
