package graph_test

import (
	"context"
	"fmt"

	"github.com/effectors/effectors/graph"
)

// A node asks two questions with Ask; each Resume runs it again from its
// start, and its Ask calls get the answers in call order.
func ExampleAsk() {
	b := graph.New[essay]()
	topic := graph.FieldOf[string](b, "topic")
	editor := graph.FieldOf[string](b, "editor")
	b.AddNode("setup", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		t, err := graph.Ask[string](ctx, "topic?")
		if err != nil {
			return graph.Update[essay]{}, err
		}
		e, err := graph.Ask[string](ctx, "who edits "+t+"?")
		if err != nil {
			return graph.Update[essay]{}, err
		}
		return graph.Updates(topic.Set(t), editor.Set(e)), nil
	})
	b.AddEdge(graph.START, "setup")
	g, err := b.Compile(graph.WithCheckpointer(graph.NewMemorySaver(0)))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, err := g.Invoke(ctx, "e1", graph.Update[essay]{})
	for _, answer := range []string{"otters", "Grace"} {
		if err != nil {
			fmt.Println(err)
			return
		}
		var q string
		_ = res.Interrupts[0].Decode(&q)
		fmt.Println("asked:", q)
		res, err = g.Resume(ctx, "e1", answer)
	}
	fmt.Println(res.State.Topic, res.State.Editor, err)
	// Output:
	// asked: topic?
	// asked: who edits otters?
	// otters Grace <nil>
}

type review struct {
	Text    string `json:"text"`
	Verdict string `json:"verdict"`
}

// A compiled graph of another state type as a node (a subgraph): its
// interrupt surfaces in the parent, which resumes it by the interrupt's id.
func ExampleAddSubgraphFunc() {
	cb := graph.New[review]()
	verdict := graph.FieldOf[string](cb, "verdict")
	cb.AddNode("judge", func(ctx context.Context, r review) (graph.Update[review], error) {
		v, err := graph.Ask[string](ctx, "accept "+r.Text+"?")
		if err != nil {
			return graph.Update[review]{}, err
		}
		return graph.Updates(verdict.Set(v)), nil
	})
	cb.AddEdge(graph.START, "judge")
	child, err := cb.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}

	b := graph.New[essay]()
	editor := graph.FieldOf[string](b, "editor")
	graph.AddSubgraphFunc(b, "review", child,
		func(s essay) review { return review{Text: s.Draft} },
		func(r review) graph.Update[essay] { return graph.Updates(editor.Set("verdict: " + r.Verdict)) })
	b.AddEdge(graph.START, "review")
	g, err := b.Compile(graph.WithCheckpointer(graph.NewMemorySaver(0)))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, err := g.Invoke(ctx, "e2", graph.Replace(essay{Draft: "draft 1"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	in := res.Interrupts[0]
	var q string
	_ = in.Decode(&q)
	fmt.Println(in.Node, q)
	res, err = g.ResumeEach(ctx, "e2", map[string]any{in.ID: "yes"})
	fmt.Println(res.State.Editor, err)
	// Output:
	// review accept draft 1?
	// verdict: yes <nil>
}

// Several stream modes at once: the state after the input and after each
// step (values), each task's writes (updates) and what nodes write
// themselves (custom).
func ExampleWithStreamModes() {
	b := graph.New[essay]()
	notes := graph.FieldOf[[]string](b, "notes", graph.Append[string])
	b.AddNode("research", func(ctx context.Context, s essay) (graph.Update[essay], error) {
		graph.WriteCustom(ctx, "searching")
		return graph.Updates(notes.Set([]string{"otters"})), nil
	})
	b.AddEdge(graph.START, "research")
	g, err := b.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	modes := graph.WithStreamModes(graph.StreamValues, graph.StreamUpdates, graph.StreamCustom)
	for ev, err := range g.Stream(context.Background(), "", graph.Update[essay]{}, modes) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Mode {
		case graph.StreamValues:
			fmt.Println("values", ev.Step, ev.State.Notes)
		case graph.StreamUpdates:
			fmt.Println("updates", ev.Node, ev.Writes[0].Field, ev.Writes[0].Value)
		case graph.StreamCustom:
			fmt.Println("custom", ev.Node, ev.Data)
		}
	}
	// Output:
	// values 0 []
	// custom research searching
	// updates research notes [otters]
	// values 1 [otters]
}

// The functional API: a function as a durable workflow. Once records a
// step's result, so when the workflow runs again after the Ask, the step
// is not repeated.
func ExampleEntrypoint() {
	w, err := graph.Entrypoint(func(ctx context.Context, topic string) (string, error) {
		draft, err := graph.Once(ctx, func(ctx context.Context) (string, error) {
			fmt.Println("drafting") // printed once
			return "otters hold hands", nil
		})
		if err != nil {
			return "", err
		}
		editor, err := graph.Ask[string](ctx, "who edits "+topic+"?")
		if err != nil {
			return "", err
		}
		return draft + " (edited by " + editor + ")", nil
	}, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, err := w.Invoke(ctx, "w1", "otters")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("paused:", res.Interrupted())
	res, err = w.Resume(ctx, "w1", "Grace")
	fmt.Println(res.Output, err)
	// Output:
	// drafting
	// paused: true
	// otters hold hands (edited by Grace) <nil>
}
