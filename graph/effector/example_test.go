package effector_test

import (
	"context"
	"fmt"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/effector"
	"github.com/effectors/effectors/records"
)

type tally struct {
	Sum  int      `json:"sum"`
	Seen []string `json:"seen"`
}

// A graph as an effector kind; Kind.Apply runs one record through it without
// NATS (a node hosting the kind does the same for every record).
func ExampleKind() {
	b := graph.New[tally]()
	sum := graph.Reduced(b, "sum", func(s *tally) *int { return &s.Sum }, graph.Sum[int])
	seen := graph.Reduced(b, "seen", func(s *tally) *[]string { return &s.Seen }, graph.Append[string])
	b.AddNode("add", func(ctx context.Context, s tally) (graph.Update[tally], error) {
		var in struct {
			By int `json:"by"`
		}
		if err := effector.Decode(ctx, &in); err != nil {
			return graph.Update[tally]{}, err
		}
		if err := effector.Emit(ctx, "added", in); err != nil {
			return graph.Update[tally]{}, err
		}
		return graph.Updates(sum.Set(in.By)), nil
	})
	b.AddNode("log", func(ctx context.Context, s tally) (graph.Update[tally], error) {
		rec, _ := effector.Record(ctx)
		return graph.Updates(seen.Set([]string{rec.Type})), nil
	})
	b.AddEdge(graph.START, "add").AddEdge(graph.START, "log")
	g, err := b.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	kind, err := effector.Kind(actor.Kind[tally]{Name: "tally"}, g)
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, err := records.New("inc", map[string]int{"by": 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	next, outs, err := kind.Apply(context.Background(), records.Ref{Kind: "tally", ID: "t1"}, rec, tally{Sum: 10})
	fmt.Println(next.Sum, next.Seen, len(outs), outs[0].Record.Type, err)
	// Output: 15 [inc] 1 added <nil>
}

// A hosted graph that asks a human: the first record leaves the effector
// waiting with the question in its state; a resume record answers it.
// Kind.Apply runs one record without NATS, as a node does for each.
func ExampleInputKind() {
	b := graph.New[tally]()
	sum := graph.Reduced(b, "sum", func(s *tally) *int { return &s.Sum }, graph.Sum[int])
	b.AddNode("ask", func(ctx context.Context, s tally) (graph.Update[tally], error) {
		n, err := graph.Ask[int](ctx, "how many?")
		if err != nil {
			return graph.Update[tally]{}, err
		}
		return graph.Updates(sum.Set(n)), nil
	})
	b.AddEdge(graph.START, "ask")
	g, err := b.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	kind, err := effector.InputKind(actor.Kind[effector.State[tally]]{Name: "asker"}, g)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, self := context.Background(), records.Ref{Kind: "asker", ID: "a1"}
	rec, _ := records.New("start", nil)
	waiting, outs, err := kind.Apply(ctx, self, rec, effector.State[tally]{})
	fmt.Println(waiting.Status, waiting.Waiting[0].Value, outs[0].Record.Type, err)

	rec, _ = records.New(effector.TypeResume, effector.Answer{Value: 7})
	done, _, err := kind.Apply(ctx, self, rec, waiting)
	fmt.Println(done.Status, done.Graph.Sum, err)
	// Output:
	// WAITING how many? interrupt <nil>
	// IDLE 7 <nil>
}
