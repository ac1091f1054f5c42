package graph_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/effectors/effectors/graph"
)

type Base struct {
	Tags []string `json:"tags"`
}

type doc struct {
	Base
	Title string `json:"title"`
	Words int
	Ptr   *Base `json:"ptr"`
	note  string
}

// TestFieldOf: one-line fields by json tag or Go name, through an embedded
// struct; mistakes are Compile errors.
func TestFieldOf(t *testing.T) {
	b := graph.New[doc]()
	title := graph.FieldOf[string](b, "title")
	words := graph.FieldOf[int](b, "Words", graph.Sum[int])
	tags := graph.FieldOf[[]string](b, "tags", graph.Append[string])
	b.AddNode("x", func(ctx context.Context, s doc) (graph.Update[doc], error) {
		return graph.Updates(title.Set("T"), words.Set(3), tags.Set([]string{"x"})), nil
	})
	b.AddNode("y", func(ctx context.Context, s doc) (graph.Update[doc], error) {
		return graph.Updates(words.Set(4), tags.Set([]string{"y"})), nil
	})
	b.AddEdge(graph.START, "x").AddEdge(graph.START, "y")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Invoke(ctxT(t), "", graph.Replace(doc{Words: 1, Base: Base{Tags: []string{"a"}}}))
	if err != nil || res.State.Title != "T" || res.State.Words != 8 || !slices.Equal(res.State.Tags, []string{"a", "x", "y"}) {
		t.Fatalf("%+v, %v", res.State, err)
	}
	if title.Get(res.State) != "T" {
		t.Fatal("Get")
	}

	for name, declare := range map[string]func(*graph.Builder[doc]){
		"missing":    func(b *graph.Builder[doc]) { graph.FieldOf[string](b, "nope") },
		"wrong type": func(b *graph.Builder[doc]) { graph.FieldOf[int](b, "title") },
		"unexported": func(b *graph.Builder[doc]) { graph.FieldOf[string](b, "note") },
		"two reducers": func(b *graph.Builder[doc]) {
			graph.FieldOf[int](b, "Words", graph.Sum[int], graph.Sum[int])
		},
	} {
		b := graph.New[doc]()
		declare(b)
		b.AddNode("n", func(ctx context.Context, s doc) (graph.Update[doc], error) { return graph.Update[doc]{}, nil })
		b.AddEdge(graph.START, "n")
		if _, err := b.Compile(); !errors.Is(err, graph.ErrInvalidGraph) {
			t.Errorf("%s: %v, want ErrInvalidGraph", name, err)
		}
	}
	if _, err := graph.New[int]().AddNode("n", func(context.Context, int) (graph.Update[int], error) { return graph.Update[int]{}, nil }).Compile(); err == nil {
		t.Fatal("no edge from START compiled")
	}
	bi := graph.New[int]()
	graph.FieldOf[int](bi, "x")
	bi.AddNode("n", func(context.Context, int) (graph.Update[int], error) { return graph.Update[int]{}, nil }).AddEdge(graph.START, "n")
	if _, err := bi.Compile(); !errors.Is(err, graph.ErrInvalidGraph) {
		t.Fatalf("non-struct state: %v", err)
	}
}
