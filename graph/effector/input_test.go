package effector_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/effector"
	"github.com/effectors/effectors/records"
)

type post struct {
	Draft     string `json:"draft"`
	Approver  string `json:"approver"`
	Published bool   `json:"published"`
}

type approval struct {
	OK bool   `json:"ok"`
	By string `json:"by"`
}

// reviewGraph: write -> approve (asks for an approval) -> publish.
func reviewGraph(t testing.TB) *graph.Graph[post] {
	t.Helper()
	b := graph.New[post]()
	draft := graph.Plain(b, "draft", func(s *post) *string { return &s.Draft })
	approver := graph.Plain(b, "approver", func(s *post) *string { return &s.Approver })
	published := graph.Plain(b, "published", func(s *post) *bool { return &s.Published })
	b.AddNode("write", func(ctx context.Context, s post) (graph.Update[post], error) {
		var in struct {
			Topic string `json:"topic"`
		}
		if err := effector.Decode(ctx, &in); err != nil {
			return graph.Update[post]{}, err
		}
		if err := effector.Emit(ctx, "drafted", in.Topic); err != nil {
			return graph.Update[post]{}, err
		}
		return graph.Updates(draft.Set("about " + in.Topic)), nil
	})
	b.AddNode("approve", func(ctx context.Context, s post) (graph.Update[post], error) {
		if err := effector.Emit(ctx, "asking", s.Draft); err != nil { // dropped while it waits
			return graph.Update[post]{}, err
		}
		a, err := graph.Ask[approval](ctx, map[string]string{"approve": s.Draft})
		if err != nil {
			return graph.Update[post]{}, err
		}
		if !a.OK {
			return graph.Updates(approver.Set(a.By)).Goto(graph.END), nil
		}
		return graph.Updates(approver.Set(a.By)), nil
	})
	b.AddNode("publish", func(ctx context.Context, s post) (graph.Update[post], error) {
		if err := effector.Emit(ctx, "published", s.Draft); err != nil {
			return graph.Update[post]{}, err
		}
		return graph.Updates(published.Set(true)), nil
	})
	b.AddEdge(graph.START, "write").AddEdge("write", "approve").AddEdge("approve", "publish").AddEdge("publish", graph.END)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestInputKindOnNode: a hosted graph that asks leaves the effector
// waiting (status and question in the state document, an interrupt record
// on the outbox); other records are refused meanwhile; after the node is
// stopped and another one started, a resume record answers it and the
// graph finishes where it paused.
func TestInputKindOnNode(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	kind, err := effector.InputKind(actor.Kind[effector.State[post]]{Name: "writer"}, reviewGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	node := actortest.StartNode(t, conn, actor.Options{}, kind)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	ref := records.Ref{Kind: "writer", ID: "w1"}
	if _, err := client.Create(ctx, ref, nil); err != nil {
		t.Fatal(err)
	}
	send := func(typ string, v any, json bool) {
		t.Helper()
		rec, err := records.New(typ, v)
		if json {
			rec, err = records.NewJSON(typ, v)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Send(ctx, ref, rec); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, cond func(actor.Document, effector.State[post]) bool) (actor.Document, effector.State[post]) {
		t.Helper()
		var d actor.Document
		var s effector.State[post]
		actortest.Eventually(t, 30*time.Second, what, func() bool {
			var err error
			if d, err = client.State(ctx, ref); err != nil {
				t.Fatal(err)
			}
			s = effector.State[post]{}
			if err := d.Decode(&s); err != nil {
				t.Fatal(err)
			}
			return cond(d, s)
		})
		return d, s
	}

	send("write", map[string]string{"topic": "otters"}, false)
	_, s := waitFor("waiting", func(_ actor.Document, s effector.State[post]) bool { return s.Status == effector.StatusWaiting })
	if s.Graph.Draft != "about otters" || len(s.Waiting) != 1 || s.Waiting[0].Node != "approve" || len(s.Checkpoint) == 0 {
		t.Fatalf("waiting state %+v", s)
	}
	if v, ok := s.Waiting[0].Value.(map[string]any); !ok || v["approve"] != "about otters" {
		t.Fatalf("question value %#v", s.Waiting[0].Value)
	}
	replayEqual := func(when string) {
		t.Helper()
		rep, err := client.Replay(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Equal {
			t.Fatalf("replay %s: %s", when, rep.Difference)
		}
	}
	replayEqual("while waiting") // the paused graph's checkpoint included

	// Meanwhile a record of another type is refused; the question stays.
	send("write", map[string]string{"topic": "seals"}, false)
	d, s := waitFor("refused", func(d actor.Document, _ effector.State[post]) bool { return d.Status == actor.StatusError })
	if !strings.Contains(d.Error, "waiting for input") || s.Status != effector.StatusWaiting || s.Graph.Draft != "about otters" {
		t.Fatalf("after a record while waiting: %s, %+v", d.Error, s)
	}

	// The node goes away; another one answers the resume record (JSON,
	// as a client in any language would send it).
	qid := s.Waiting[0].ID
	node.Stop(t)
	actortest.StartNode(t, conn, actor.Options{}, kind)
	send(effector.TypeResume, map[string]any{"id": qid, "value": map[string]any{"ok": true, "by": "ann"}}, true)
	_, s = waitFor("published", func(_ actor.Document, s effector.State[post]) bool { return s.Status == effector.StatusIdle })
	if !s.Graph.Published || s.Graph.Approver != "ann" || len(s.Waiting) != 0 || len(s.Checkpoint) != 0 {
		t.Fatalf("final state %+v", s)
	}

	// A resume while idle is refused.
	send(effector.TypeResume, effector.Answer{Value: approval{OK: true}}, false)
	waitFor("resume refused", func(d actor.Document, _ effector.State[post]) bool {
		return d.Status == actor.StatusError && strings.Contains(d.Error, "not waiting")
	})

	// The outbox: drafted, the question, then (after the resume) published;
	// "asking" only from the run that got its answer.
	recs, err := client.Subscribe(ctx, ref, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, rec.Type)
		if rec.Type == effector.TypeInterrupt {
			var q effector.Question
			if err := rec.Decode(&q); err != nil || q.ID != qid || q.Node != "approve" {
				t.Fatalf("interrupt record %+v, %v", q, err)
			}
		}
		if len(types) == 4 {
			break
		}
	}
	if strings.Join(types, ",") != "drafted,interrupt,asking,published" {
		t.Fatalf("outbox %v", types)
	}
	replayEqual("after the resume")
}

// TestInputKindApply: two questions in one step, answered one by one by id;
// an unknown id and a resume while idle are permanent errors.
func TestInputKindApply(t *testing.T) {
	t.Parallel()
	b := graph.New[acc]()
	seen := graph.Reduced(b, "seen", func(s *acc) *[]string { return &s.Seen }, graph.Append[string])
	for _, n := range []string{"x", "y"} {
		b.AddNode(n, func(ctx context.Context, s acc) (graph.Update[acc], error) {
			a, err := graph.Ask[string](ctx, n+"?")
			if err != nil {
				return graph.Update[acc]{}, err
			}
			return graph.Updates(seen.Set([]string{n + "=" + a})), nil
		})
		b.AddEdge(graph.START, n)
	}
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	kind, err := effector.InputKind(actor.Kind[effector.State[acc]]{Name: "two"}, g)
	if err != nil {
		t.Fatal(err)
	}
	ctx, self := context.Background(), records.Ref{Kind: "two", ID: "t"}
	apply := func(typ string, v any, s effector.State[acc]) (effector.State[acc], int, error) {
		t.Helper()
		rec, err := records.New(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		next, outs, err := kind.Apply(ctx, self, rec, s)
		return next, len(outs), err
	}
	s, n, err := apply("go", nil, effector.State[acc]{})
	if err != nil || s.Status != effector.StatusWaiting || len(s.Waiting) != 2 || n != 2 {
		t.Fatalf("first: %+v, %d outputs, %v", s, n, err)
	}
	if _, _, err := apply(effector.TypeResume, effector.Answer{ID: "nope", Value: "?"}, s); !actor.IsPermanent(err) || !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("unknown id: %v", err)
	}
	s, _, err = apply(effector.TypeResume, effector.Answer{ID: s.Waiting[1].ID, Value: "2"}, s)
	if err != nil || s.Status != effector.StatusWaiting || len(s.Waiting) != 1 || s.Waiting[0].Node != "x" {
		t.Fatalf("after y: %+v, %v", s, err)
	}
	s, _, err = apply(effector.TypeResume, effector.Answer{Value: "1"}, s)
	if err != nil || s.Status != effector.StatusIdle || strings.Join(s.Graph.Seen, ",") != "x=1,y=2" {
		t.Fatalf("after x: %+v, %v", s, err)
	}
	if _, _, err := apply(effector.TypeResume, effector.Answer{Value: "1"}, s); !errors.Is(err, effector.ErrNotWaiting) || !actor.IsPermanent(err) {
		t.Fatalf("resume while idle: %v", err)
	}
	if _, err := effector.InputKind(actor.Kind[effector.State[acc]]{Name: "x"}, nil); !errors.Is(err, effector.ErrInvalid) {
		t.Fatalf("nil graph: %v", err)
	}
}

// TestInputKindJSONNumbers: answers sent as JSON decode into the integer
// and float fields the node asks for.
func TestInputKindJSONNumbers(t *testing.T) {
	t.Parallel()
	type form struct {
		N int     `json:"n"`
		F float64 `json:"f"`
	}
	b := graph.New[acc]()
	total := graph.Reduced(b, "total", func(s *acc) *int { return &s.Total }, graph.Sum[int])
	b.AddNode("ask", func(ctx context.Context, s acc) (graph.Update[acc], error) {
		n, err := graph.Ask[int](ctx, "n?")
		if err != nil {
			return graph.Update[acc]{}, err
		}
		fm, err := graph.Ask[form](ctx, "form?")
		if err != nil {
			return graph.Update[acc]{}, err
		}
		return graph.Updates(total.Set(n + fm.N + int(fm.F*10))), nil
	})
	b.AddEdge(graph.START, "ask")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	kind, err := effector.InputKind(actor.Kind[effector.State[acc]]{Name: "nums"}, g)
	if err != nil {
		t.Fatal(err)
	}
	ctx, self := context.Background(), records.Ref{Kind: "nums", ID: "n"}
	s := effector.State[acc]{}
	for _, step := range []struct {
		typ  string
		json any
	}{{"go", nil}, {effector.TypeResume, map[string]any{"value": 2}}, {effector.TypeResume, map[string]any{"value": map[string]any{"n": 3, "f": 0.5}}}} {
		rec, err := records.NewJSON(step.typ, step.json)
		if err != nil {
			t.Fatal(err)
		}
		if s, _, err = kind.Apply(ctx, self, rec, s); err != nil {
			t.Fatalf("%s: %v", step.typ, err)
		}
	}
	if s.Status != effector.StatusIdle || s.Graph.Total != 10 {
		t.Fatalf("final %+v", s)
	}
}
