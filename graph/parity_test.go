package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/effectors/effectors/graph"
)

// The tests in this file encode what LangGraph.js 1.7.3 does in the same
// graphs: bench/langgraph/parity.mjs prints it (npm install there, then
// node parity.mjs); each test quotes the lines it follows.

// ps is the state of parity.mjs: count (a value), log (appended), name (a
// value nothing writes unless the test says so).
type ps struct {
	Count int      `json:"count"`
	Log   []string `json:"log"`
	Name  string   `json:"name"`
}

type psFields struct {
	count *graph.Field[ps, int]
	log   *graph.Field[ps, []string]
	name  *graph.Field[ps, string]
}

func newPS() (*graph.Builder[ps], psFields) {
	b := graph.New[ps]()
	return b, psFields{
		count: graph.FieldOf[int](b, "count"),
		log:   graph.FieldOf[[]string](b, "log", graph.Append[string]),
		name:  graph.FieldOf[string](b, "name"),
	}
}

func psEqual(a, b ps) bool {
	return a.Count == b.Count && a.Name == b.Name && slices.Equal(a.Log, b.Log)
}

// TestParitySubgraphSharedKeys: a subgraph added with AddSubgraph passes
// its final state through the parent's reducers, so the appended log
// repeats the items the child started with; a key that has no value
// (zero in the child's input and output) is not written.
//
//	subgraph.invoke: {"count":20,"log":["in","p","in","p","c"]}
//	subgraph.updates: [{"p":{"log":["p"],"count":2}},{"sub":{"count":20,"log":["in","p","c"]}}]
//	subgraph.sibling: {"count":10,"log":["in","in","c"],"name":"other"}
//	subgraph.sibling-lastvalue {"count":1}: {"count":10,"log":["c"],"name":"other"}
//	subgraph.sibling-lastvalue {"count":1,"name":"in"} error: "InvalidUpdateError: Invalid update for channel \"name\" ..."
func TestParitySubgraphSharedKeys(t *testing.T) {
	cb, cf := newPS()
	cb.AddNode("c", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(cf.log.Set([]string{"c"}), cf.count.Set(s.Count*10)), nil
	})
	cb.AddEdge(graph.START, "c")
	child := mustCompile(t, cb)
	ctx := ctxT(t)

	b, f := newPS()
	b.AddNode("p", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f.log.Set([]string{"p"}), f.count.Set(s.Count+1)), nil
	})
	graph.AddSubgraph(b, "sub", child)
	b.AddEdge(graph.START, "p").AddEdge("p", "sub").AddEdge("sub", graph.END)
	input := graph.Updates(f.count.Set(1), f.log.Set([]string{"in"}))
	for _, saver := range []graph.Checkpointer{nil, graph.NewMemorySaver(0)} {
		var opts []graph.Option
		thread := ""
		if saver != nil {
			opts, thread = append(opts, graph.WithCheckpointer(saver)), "t"
		}
		g := mustCompile(t, b, opts...)
		res, err := g.Invoke(ctx, thread, input)
		if want := (ps{Count: 20, Log: []string{"in", "p", "in", "p", "c"}}); err != nil || !psEqual(res.State, want) {
			t.Fatalf("saver %v: invoke %+v, %v; want %+v", saver != nil, res.State, err, want)
		}
	}
	g := mustCompile(t, b)
	var updates []string
	for ev, err := range g.Stream(ctx, "", input, graph.WithStreamModes(graph.StreamUpdates)) {
		if err != nil {
			t.Fatal(err)
		}
		w := map[string]any{}
		for _, sw := range ev.Writes {
			w[sw.Field] = sw.Value
		}
		updates = append(updates, fmt.Sprintf("%s:%v", ev.Node, w))
	}
	if want := []string{"p:map[count:2 log:[p]]", "sub:map[count:20 log:[in p c]]"}; !slices.Equal(updates, want) {
		t.Fatalf("updates %v, want %v", updates, want)
	}

	// A sibling writing name, a plain field, in the subgraph's step.
	b2, f2 := newPS()
	graph.AddSubgraph(b2, "sub", child)
	b2.AddNode("other", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f2.name.Set("other")), nil
	})
	b2.AddEdge(graph.START, "sub").AddEdge(graph.START, "other")
	g2 := mustCompile(t, b2)
	res, err := g2.Invoke(ctx, "", graph.Updates(f2.count.Set(1), f2.log.Set([]string{"in"})))
	if want := (ps{Count: 10, Log: []string{"in", "in", "c"}, Name: "other"}); err != nil || !psEqual(res.State, want) {
		t.Fatalf("sibling: %+v, %v; want %+v", res.State, err, want)
	}
	res, err = g2.Invoke(ctx, "", graph.Updates(f2.count.Set(1)))
	if want := (ps{Count: 10, Log: []string{"c"}, Name: "other"}); err != nil || !psEqual(res.State, want) {
		t.Fatalf("sibling, name unset: %+v, %v; want %+v", res.State, err, want)
	}
	_, err = g2.Invoke(ctx, "", graph.Updates(f2.count.Set(1), f2.name.Set("in")))
	var ie *graph.InvalidUpdateError
	if !errors.As(err, &ie) || ie.Field != "name" {
		t.Fatalf("sibling, name set: %v; want an InvalidUpdateError on name", err)
	}
}

// TestParitySubgraphUndeclared: the fields the parent's builder does not
// declare take the subgraph's values (no reducer applies to them), and a
// subgraph's output kept as a pending write survives a failed step.
func TestParitySubgraphUndeclared(t *testing.T) {
	cb, cf := newPS()
	cb.AddNode("c", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(cf.log.Set([]string{"c"}), cf.name.Set("child")), nil
	})
	cb.AddEdge(graph.START, "c")
	child := mustCompile(t, cb)

	b := graph.New[ps]()
	logs := graph.FieldOf[[]string](b, "log", graph.Append[string]) // count and name are not declared
	fail := true
	graph.AddSubgraph(b, "sub", child)
	b.AddNode("flaky", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		if fail {
			return graph.Update[ps]{}, errors.New("down")
		}
		return graph.Updates(logs.Set([]string{"flaky"})), nil
	})
	b.AddEdge(graph.START, "sub").AddEdge(graph.START, "flaky")
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	in := graph.Replace(ps{Count: 3, Log: []string{"in"}})
	if _, err := g.Invoke(ctx, "t", in); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("first run: %v", err)
	}
	fail = false
	res, err := g.Continue(ctx, "t")
	if want := (ps{Count: 3, Log: []string{"in", "flaky", "in", "c"}, Name: "child"}); err != nil || !psEqual(res.State, want) {
		t.Fatalf("continue: %+v, %v; want %+v", res.State, err, want)
	}
}

// TestParityWriteOrder: the writes of a super-step are applied in the
// order of the nodes' names, whatever the order they were added in, then
// the Send runs in the order of the Sends, whose order is that of the
// nodes that made them.
//
//	order.added-zeta-alpha-mid: ["alpha","mid","zeta"]
//	order.added-mid-zeta-alpha: ["alpha","mid","zeta"]
//	order.sends: ["aa","zz","w2","w1","w3"]
//	order.sends-two-sources: ["wa1","wz1","wz2"]
func TestParityWriteOrder(t *testing.T) {
	ctx := ctxT(t)
	for _, added := range [][]string{{"zeta", "alpha", "mid"}, {"mid", "zeta", "alpha"}} {
		b, f := newPS()
		for _, n := range added {
			b.AddNode(n, func(ctx context.Context, s ps) (graph.Update[ps], error) {
				return graph.Updates(f.log.Set([]string{n})), nil
			})
			b.AddEdge(graph.START, n)
		}
		res, err := mustCompile(t, b).Invoke(ctx, "", graph.Update[ps]{})
		if want := []string{"alpha", "mid", "zeta"}; err != nil || !slices.Equal(res.State.Log, want) {
			t.Fatalf("added %v: log %v, %v; want %v", added, res.State.Log, err, want)
		}
	}

	b, f := newPS()
	nop := func(ctx context.Context, s ps) (graph.Update[ps], error) { return graph.Update[ps]{}, nil }
	b.AddNode("fan", nop)
	b.AddNode("w", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f.log.Set([]string{"w" + s.Name})), nil
	})
	b.AddNode("zz", logPS(f, "zz"))
	b.AddNode("aa", logPS(f, "aa"))
	b.AddEdge(graph.START, "fan").AddEdge("fan", "zz").AddEdge("fan", "aa")
	b.AddSends("fan", sendsPS("2", "1", "3"))
	res, err := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0))).Invoke(ctx, "t", graph.Update[ps]{})
	if want := []string{"aa", "zz", "w2", "w1", "w3"}; err != nil || !slices.Equal(res.State.Log, want) {
		t.Fatalf("sends: log %v, %v; want %v", res.State.Log, err, want)
	}

	b, f = newPS()
	b.AddNode("zeta", nop).AddNode("alpha", nop)
	b.AddNode("w", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f.log.Set([]string{"w" + s.Name})), nil
	})
	b.AddEdge(graph.START, "zeta").AddEdge(graph.START, "alpha")
	b.AddSends("zeta", sendsPS("z1", "z2"))
	b.AddSends("alpha", sendsPS("a1"))
	res, err = mustCompile(t, b).Invoke(ctx, "", graph.Update[ps]{})
	if want := []string{"wa1", "wz1", "wz2"}; err != nil || !slices.Equal(res.State.Log, want) {
		t.Fatalf("sends of two nodes: log %v, %v; want %v", res.State.Log, err, want)
	}
}

func logPS(f psFields, name string) graph.NodeFunc[ps] {
	return func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f.log.Set([]string{name})), nil
	}
}

func sendsPS(names ...string) graph.Fanout[ps] {
	return func(ctx context.Context, s ps) ([]graph.Send[ps], error) {
		var out []graph.Send[ps]
		for _, n := range names {
			out = append(out, graph.Send[ps]{Node: "w", State: ps{Name: n}})
		}
		return out, nil
	}
}

func abPS(t *testing.T, opts ...graph.Option) (*graph.Graph[ps], psFields) {
	t.Helper()
	b, f := newPS()
	inc := func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f.count.Set(s.Count + 1)), nil
	}
	b.AddNode("a", inc).AddNode("b", inc)
	b.AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", graph.END)
	return mustCompile(t, b, opts...), f
}

// TestParityStream: StreamValues yields the input state first, then the
// state after each step; the default stream (LangGraph's is "updates")
// does not yield the input. Resuming a paused thread in StreamValues
// (Continue after a breakpoint, Resume after Ask) yields the state it
// resumes from first. A paused run ends with an Event of Mode 0 where
// LangGraph yields a values chunk {"__interrupt__": [...]}.
//
//	stream.default: [{"a":{"count":1}},{"b":{"count":2}}]
//	stream.values: [{"count":0,"log":[]},{"count":1,"log":[]},{"count":2,"log":[]}]
//	stream.values+updates: [["values",{"count":0,...}],["updates",{"a":{"count":1}}],["values",{"count":1,...}],["updates",{"b":{"count":2}}],["values",{"count":2,...}]]
//	stream.values-paused: [{"count":0,"log":[]},{"count":1,"log":[]},{"__interrupt__":[]}]
//	stream.values-continue: [{"count":1,"log":[]},{"count":2,"log":[]}]
//	stream.values-asked: [{"count":0,"log":[]},{"count":1,"log":[]},{"__interrupt__":[{"id":"...","value":"who?"}]}]
//	stream.values-resume: [{"count":1,"log":[]},{"count":1,"log":[],"name":"Ada"}]
func TestParityStream(t *testing.T) {
	ctx := ctxT(t)
	g, f := abPS(t)
	collect := func(seq func(func(graph.Event[ps], error) bool)) []string {
		t.Helper()
		var out []string
		for ev, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			switch ev.Mode {
			case 0:
				s := fmt.Sprintf("step%v:count=%d", ev.Nodes, ev.State.Count)
				if ev.Breakpoint != "" {
					s = "breakpoint:" + ev.Breakpoint
				}
				out = append(out, s)
			case graph.StreamValues:
				out = append(out, fmt.Sprintf("values:count=%d", ev.State.Count))
			case graph.StreamUpdates:
				out = append(out, fmt.Sprintf("updates:%s:%v", ev.Node, ev.Writes[0].Value))
			}
		}
		return out
	}
	in := graph.Updates(f.count.Set(0))
	for _, tc := range []struct {
		name  string
		modes []graph.StreamMode
		want  []string
	}{
		{"default", nil, []string{"step[a]:count=1", "step[b]:count=2"}},
		{"values", []graph.StreamMode{graph.StreamValues}, []string{"values:count=0", "values:count=1", "values:count=2"}},
		{"values+updates", []graph.StreamMode{graph.StreamValues, graph.StreamUpdates},
			[]string{"values:count=0", "updates:a:1", "values:count=1", "updates:b:2", "values:count=2"}},
	} {
		if got := collect(g.Stream(ctx, "", in, graph.WithStreamModes(tc.modes...))); !slices.Equal(got, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	p, f := abPS(t, graph.WithCheckpointer(graph.NewMemorySaver(0)), graph.WithBreakpoints([]string{"b"}, nil))
	values := graph.WithStreamModes(graph.StreamValues)
	if got, want := collect(p.Stream(ctx, "s", graph.Updates(f.count.Set(0)), values)), []string{"values:count=0", "values:count=1", "breakpoint:b"}; !slices.Equal(got, want) {
		t.Fatalf("paused: %v, want %v", got, want)
	}
	if got, want := collect(p.StreamContinue(ctx, "s", values)), []string{"values:count=1", "values:count=2"}; !slices.Equal(got, want) {
		t.Fatalf("continue: %v, want %v", got, want)
	}

	b, f := newPS()
	b.AddNode("a", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		return graph.Updates(f.count.Set(s.Count + 1)), nil
	})
	b.AddNode("ask", func(ctx context.Context, s ps) (graph.Update[ps], error) {
		who, err := graph.Ask[string](ctx, "who?")
		if err != nil {
			return graph.Update[ps]{}, err
		}
		return graph.Updates(f.name.Set(who)), nil
	})
	b.AddEdge(graph.START, "a").AddEdge("a", "ask").AddEdge("ask", graph.END)
	q := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	var got []string
	for ev, err := range q.Stream(ctx, "q", graph.Updates(f.count.Set(0)), values) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:count=%d,name=%q,interrupts=%d", ev.Mode, ev.State.Count, ev.State.Name, len(ev.Interrupts)))
	}
	for ev, err := range q.StreamResume(ctx, "q", "Ada", values) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:count=%d,name=%q", ev.Mode, ev.State.Count, ev.State.Name))
	}
	want := []string{`1:count=0,name="",interrupts=0`, `1:count=1,name="",interrupts=0`, `0:count=1,name="",interrupts=1`,
		`1:count=1,name=""`, `1:count=1,name="Ada"`}
	if !slices.Equal(got, want) {
		t.Fatalf("ask and resume:\n got %v\nwant %v", got, want)
	}
}

// TestParitySteps: checkpoint steps as LangGraph's metadata step, except
// that LangGraph's first checkpoint of each invocation (source input,
// holding the state before the input, at the head's step + 1; -1 on a new
// thread) is not written here: the input checkpoint here holds the state
// after the input, LangGraph's next one (source loop).
//
//	steps.first-invoke: ["input:-1:count=0","loop:0:count=0","loop:1:count=1","loop:2:count=2"]
//	steps.second-invoke: [... ,"loop:2:count=2","input:3:count=2","loop:4:count=10","loop:5:count=11","loop:6:count=12"]
//	steps.update-state: ["update:7:count=100"]
//	steps.update-state-as-node: ["update:8:count=200"]
//	steps.fork: {"from":"loop:1","fork":"update:2","next":["b"]}
//	steps.fork-continued-head: "loop:3:count=51"
//	steps.update-as-node-on-finished: ["input:-1:next=__start__","loop:0:next=a","loop:1:next=b","loop:2:next=","update:3:next=b"]
//	steps.continue-after-update: [... ,"loop:2:count=2","update:3:count=5","loop:4:count=6"]
func TestParitySteps(t *testing.T) {
	g, f := abPS(t, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	hist := func(thread string) []string {
		t.Helper()
		h, err := g.History(ctx, thread, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range slices.Backward(h) {
			out = append(out, fmt.Sprintf("%s:%d:count=%d", s.Checkpoint.Source, s.Checkpoint.Step, s.State.Count))
		}
		return out
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
		}
	}
	if _, err := g.Invoke(ctx, "t", graph.Updates(f.count.Set(0))); err != nil {
		t.Fatal(err)
	}
	first := []string{"input:0:count=0", "loop:1:count=1", "loop:2:count=2"}
	check("first invocation", hist("t"), first)
	res, err := g.Invoke(ctx, "t", graph.Updates(f.count.Set(10)))
	if err != nil || res.Step != 6 {
		t.Fatalf("second invocation: %+v, %v; want step 6", res, err)
	}
	check("second invocation", hist("t"), append(slices.Clone(first), "input:4:count=10", "loop:5:count=11", "loop:6:count=12"))
	if _, err := g.UpdateState(ctx, "t", graph.Updates(f.count.Set(100))); err != nil {
		t.Fatal(err)
	}
	check("update", hist("t")[6:], []string{"update:7:count=100"})
	if _, err := g.UpdateState(ctx, "t", graph.Updates(f.count.Set(200)), graph.AsNode("a")); err != nil {
		t.Fatal(err)
	}
	check("update as node", hist("t")[7:], []string{"update:8:count=200"})

	// A fork: an update of the first run's checkpoint after a.
	h, err := g.History(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	afterA := h[len(h)-2]
	if afterA.Checkpoint.Step != 1 || afterA.State.Count != 1 {
		t.Fatalf("checkpoint after a: %+v", afterA.Checkpoint)
	}
	fk, err := g.UpdateState(ctx, "t", graph.Updates(f.count.Set(50)), graph.At(afterA.Checkpoint.ID))
	if err != nil || fk.Checkpoint.Source != graph.SourceUpdate || fk.Checkpoint.Step != 2 || !slices.Equal(fk.Next, []string{"b"}) {
		t.Fatalf("fork: %+v, %v; want update:2 with next [b]", fk.Checkpoint, err)
	}
	if res, err := g.Continue(ctx, "t"); err != nil || res.Step != 3 || res.State.Count != 51 {
		t.Fatalf("fork continued: %+v, %v; want loop:3:count=51", res, err)
	}
	// Fork copies a checkpoint with the step after it, as LangGraph's
	// update_state(config, None, "__copy__") (source fork, step + 1).
	cp, err := g.Fork(ctx, "t", afterA.Checkpoint.ID, "t3")
	if err != nil || cp.Checkpoint.Source != graph.SourceFork || cp.Checkpoint.Step != 2 {
		t.Fatalf("Fork: %+v, %v; want fork:2", cp.Checkpoint, err)
	}

	if _, err := g.Invoke(ctx, "t2", graph.Updates(f.count.Set(0))); err != nil {
		t.Fatal(err)
	}
	up, err := g.UpdateState(ctx, "t2", graph.Updates(f.count.Set(5)), graph.AsNode("a"))
	if err != nil || up.Checkpoint.Step != 3 || !slices.Equal(up.Next, []string{"b"}) {
		t.Fatalf("update as node on a finished thread: %+v, %v; want update:3 with next [b]", up.Checkpoint, err)
	}
	if _, err := g.Continue(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	check("continue after update", hist("t2"), append(slices.Clone(first), "update:3:count=5", "loop:4:count=6"))
}
