package graph_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/effectors/effectors/graph"
)

type obsState struct {
	Log []string `json:"log"`
}

// TestObserve: Invoke with Observe hands over the custom values, message
// chunks and task events of every node, the subgraph's included, while the
// run goes on (each part before its node returns), and only the modes
// asked for.
func TestObserve(t *testing.T) {
	cb := graph.New[obsState]()
	graph.Reduced(cb, "log", func(s *obsState) *[]string { return &s.Log }, graph.Append[string])
	cb.AddNode("inner", func(ctx context.Context, s obsState) (graph.Update[obsState], error) {
		graph.WriteCustom(ctx, "inner ran")
		return graph.Update[obsState]{}, nil
	})
	cb.AddEdge(graph.START, "inner")
	child, err := cb.Compile()
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var parts []graph.Part
	returned := map[string]bool{} // node -> returned already when a part of it came
	b := graph.New[obsState]()
	logs := graph.Reduced(b, "log", func(s *obsState) *[]string { return &s.Log }, graph.Append[string])
	b.AddNode("a", func(ctx context.Context, s obsState) (graph.Update[obsState], error) {
		graph.WriteMessage(ctx, "a-tok1")
		graph.WriteCustom(ctx, "a")
		graph.WriteMessage(ctx, "a-tok2")
		mu.Lock()
		returned["a"] = true
		mu.Unlock()
		return graph.Updates(logs.Set([]string{"a"})), nil
	})
	graph.AddSubgraph(b, "sub", child)
	b.AddEdge(graph.START, "a").AddEdge(graph.START, "sub")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	observe := graph.Observe(graph.StreamCustom|graph.StreamMessages|graph.StreamTasks|graph.StreamValues, func(p graph.Part) {
		mu.Lock()
		defer mu.Unlock()
		if (p.Mode == graph.StreamMessages || p.Mode == graph.StreamCustom) && returned[p.Node] {
			t.Errorf("part %+v came after node %s returned", p, p.Node)
		}
		parts = append(parts, p)
	})
	if _, err := g.Invoke(t.Context(), "", graph.Replace(obsState{}), observe); err != nil {
		t.Fatal(err)
	}
	var msgs, customs, starts, ends []string
	for _, p := range parts {
		switch {
		case p.Mode == graph.StreamMessages:
			msgs = append(msgs, p.Data.(string))
		case p.Mode == graph.StreamCustom && p.Namespace != "":
			customs = append(customs, p.Node+"@sub:"+p.Data.(string))
		case p.Mode == graph.StreamCustom:
			customs = append(customs, p.Node)
		case p.Mode == graph.StreamTasks && p.Kind == "task" && p.Namespace == "":
			starts = append(starts, p.Node)
		case p.Mode == graph.StreamTasks && p.Kind == "task_result" && p.Namespace == "":
			ends = append(ends, p.Node)
			if p.Err != nil {
				t.Errorf("task_result of %s: %v", p.Node, p.Err)
			}
		case p.Mode != graph.StreamTasks:
			t.Errorf("part of mode %v: only custom, messages and tasks are observed", p.Mode)
		}
	}
	slices.Sort(starts)
	slices.Sort(ends)
	slices.Sort(customs)
	if !slices.Equal(msgs, []string{"a-tok1", "a-tok2"}) || !slices.Equal(customs, []string{"a", "inner@sub:inner ran"}) ||
		!slices.Equal(starts, []string{"a", "sub"}) || !slices.Equal(ends, []string{"a", "sub"}) {
		t.Fatalf("messages %v, custom %v, starts %v, ends %v", msgs, customs, starts, ends)
	}

	// Only the modes asked for; a failing node's task_result carries its error.
	parts = nil
	b2 := graph.New[obsState]()
	b2.AddNode("b", func(ctx context.Context, s obsState) (graph.Update[obsState], error) {
		graph.WriteMessage(ctx, "tok")
		return graph.Update[obsState]{}, errors.New("b fails")
	}, graph.WithRetry(graph.RetryPolicy{Attempts: 1}))
	b2.AddEdge(graph.START, "b")
	g2, err := b2.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var got []graph.Part
	_, err = g2.Invoke(t.Context(), "", graph.Replace(obsState{}), graph.Observe(graph.StreamTasks, func(p graph.Part) { got = append(got, p) }))
	if err == nil {
		t.Fatal("want the node's error")
	}
	if len(got) != 2 || got[0].Kind != "task" || got[1].Kind != "task_result" || got[1].Err == nil {
		t.Fatalf("task parts %+v: want a start and an end with the error", got)
	}
}
