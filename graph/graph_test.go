package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/graph"
)

type st struct {
	Count int      `json:"count"`
	Name  string   `json:"name"`
	Item  string   `json:"item"`
	Log   []string `json:"log"`
	Total int      `json:"total"`
}

type fields struct {
	count *graph.Field[st, int]
	name  *graph.Field[st, string]
	log   *graph.Field[st, []string]
	total *graph.Field[st, int]
}

func newBuilder() (*graph.Builder[st], fields) {
	b := graph.New[st]()
	return b, fields{
		count: graph.Plain(b, "count", func(s *st) *int { return &s.Count }),
		name:  graph.Plain(b, "name", func(s *st) *string { return &s.Name }),
		log:   graph.Reduced(b, "log", func(s *st) *[]string { return &s.Log }, graph.Append[string]),
		total: graph.Reduced(b, "total", func(s *st) *int { return &s.Total }, graph.Sum[int]),
	}
}

// logNode appends its name to the log.
func logNode(f fields, name string) graph.NodeFunc[st] {
	return func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f.log.Set([]string{name})), nil
	}
}

func mustCompile[S any](t *testing.T, b *graph.Builder[S], opts ...graph.Option) *graph.Graph[S] {
	t.Helper()
	g, err := b.Compile(opts...)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLinearCounter(t *testing.T) {
	b, f := newBuilder()
	prev := graph.START
	for i := range 10 {
		name := fmt.Sprintf("n%d", i)
		b.AddNode(name, func(ctx context.Context, s st) (graph.Update[st], error) {
			return graph.Updates(f.count.Set(s.Count + 1)), nil
		})
		b.AddEdge(prev, name)
		prev = name
	}
	b.AddEdge(prev, graph.END)
	for _, withSaver := range []bool{false, true} {
		var opts []graph.Option
		if withSaver {
			opts = append(opts, graph.WithCheckpointer(graph.NewMemorySaver(0)))
		}
		g := mustCompile(t, b, opts...)
		res, err := g.Invoke(ctxT(t), "t1", graph.Updates(f.count.Set(5)))
		if err != nil {
			t.Fatal(err)
		}
		if res.State.Count != 15 || res.Step != 10 || res.Interrupted() {
			t.Fatalf("saver=%v: got %+v, want count 15 after 10 steps", withSaver, res)
		}
		if withSaver {
			// A second invocation of the thread starts from its state; its
			// input checkpoint takes the head's step + 2, as LangGraph's
			// checkpoint after the input does (TestParitySteps).
			res, err = g.Invoke(ctxT(t), "t1", graph.Update[st]{})
			if err != nil || res.State.Count != 25 || res.Step != 22 {
				t.Fatalf("second run: %+v, %v; want count 25 at step 22", res, err)
			}
		}
	}
}

// TestPlainFieldWrites: a plain field takes one write per super-step; a
// reduced field merges all.
func TestPlainFieldWrites(t *testing.T) {
	cases := []struct {
		name    string
		b, c    func(f fields) graph.Update[st] // two parallel nodes
		wantErr bool
		field   string
		want    st
	}{
		{name: "plain written by two nodes",
			b:       func(f fields) graph.Update[st] { return graph.Updates(f.name.Set("b")) },
			c:       func(f fields) graph.Update[st] { return graph.Updates(f.name.Set("c")) },
			wantErr: true, field: "name"},
		{name: "plain written twice by one node",
			b:       func(f fields) graph.Update[st] { return graph.Updates(f.name.Set("b"), f.name.Set("b2")) },
			c:       func(f fields) graph.Update[st] { return graph.Update[st]{} },
			wantErr: true, field: "name"},
		{name: "replace beside a write",
			b:       func(f fields) graph.Update[st] { return graph.Replace(st{Name: "r"}) },
			c:       func(f fields) graph.Update[st] { return graph.Updates(f.count.Set(1)) },
			wantErr: true, field: "count"},
		{name: "replace after a reduced write",
			b:       func(f fields) graph.Update[st] { return graph.Updates(f.log.Set([]string{"b"})) },
			c:       func(f fields) graph.Update[st] { return graph.Replace(st{Name: "r"}) },
			wantErr: true},
		{name: "merge without a state reducer",
			b:       func(f fields) graph.Update[st] { return graph.Merge(st{Name: "m"}) },
			c:       func(f fields) graph.Update[st] { return graph.Update[st]{} },
			wantErr: true},
		{name: "reduced written by both, plain fields by one each",
			b: func(f fields) graph.Update[st] {
				return graph.Updates(f.log.Set([]string{"b"}), f.total.Set(2), f.name.Set("b"))
			},
			c: func(f fields) graph.Update[st] {
				return graph.Updates(f.log.Set([]string{"c1", "c2"}), f.total.Set(3), f.count.Set(7))
			},
			want: st{Name: "b", Count: 7, Log: []string{"b", "c1", "c2"}, Total: 5}},
		{name: "replace alone",
			b:    func(f fields) graph.Update[st] { return graph.Replace(st{Name: "r", Log: []string{"x"}}) },
			c:    func(f fields) graph.Update[st] { return graph.Update[st]{} },
			want: st{Name: "r", Log: []string{"x"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, f := newBuilder()
			b.AddNode("b", func(context.Context, st) (graph.Update[st], error) { return tc.b(f), nil })
			b.AddNode("c", func(context.Context, st) (graph.Update[st], error) { return tc.c(f), nil })
			b.AddEdge(graph.START, "b").AddEdge(graph.START, "c")
			g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
			res, err := g.Invoke(ctxT(t), "t", graph.Update[st]{})
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if !equalSt(res.State, tc.want) {
					t.Fatalf("state %+v, want %+v", res.State, tc.want)
				}
				return
			}
			var ie *graph.InvalidUpdateError
			if !errors.As(err, &ie) || !errors.Is(err, graph.ErrInvalidUpdate) {
				t.Fatalf("err = %v, want *InvalidUpdateError", err)
			}
			if ie.Field != tc.field || ie.Step != 1 {
				t.Fatalf("error names field %q step %d, want %q step 1: %v", ie.Field, ie.Step, tc.field, err)
			}
			// Nothing of the bad step was applied: the head is the input checkpoint.
			snap, err := g.State(ctxT(t), "t")
			if err != nil || snap.Checkpoint.Step != 0 || !equalSt(snap.State, st{}) {
				t.Fatalf("head after a bad step: %+v, %v", snap, err)
			}
		})
	}
}

func equalSt(a, b st) bool {
	return a.Count == b.Count && a.Name == b.Name && a.Item == b.Item && a.Total == b.Total &&
		slices.Equal(a.Log, b.Log)
}

// TestApplyOrder: updates of a step are applied in the order of the
// nodes' names (LangGraph's order), not by completion order nor by the
// order the nodes were added in.
func TestApplyOrder(t *testing.T) {
	for _, finishFirst := range []string{"a", "b", "c"} {
		t.Run("first done "+finishFirst, func(t *testing.T) {
			b, f := newBuilder()
			done := make(chan struct{})
			node := func(name string) graph.NodeFunc[st] {
				return func(ctx context.Context, s st) (graph.Update[st], error) {
					if name == finishFirst {
						defer close(done)
					} else {
						select { // wait until the chosen node has finished
						case <-done:
						case <-ctx.Done():
							return graph.Update[st]{}, ctx.Err()
						}
					}
					return graph.Updates(f.log.Set([]string{name})), nil
				}
			}
			// Added in the order c, a, b; applied a, b, c.
			for _, n := range []string{"c", "a", "b"} {
				b.AddNode(n, node(n))
			}
			for _, n := range []string{"a", "b", "c"} {
				b.AddEdge(graph.START, n)
			}
			g := mustCompile(t, b)
			res, err := g.Invoke(ctxT(t), "", graph.Update[st]{})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"a", "b", "c"}; !slices.Equal(res.State.Log, want) {
				t.Fatalf("log %v, want %v", res.State.Log, want)
			}
		})
	}
}

// TestSendOrder: Send runs are reduced in Send order whatever their
// completion order; each run gets its own input.
func TestSendOrder(t *testing.T) {
	items := []string{"i0", "i1", "i2", "i3", "i4"}
	b, f := newBuilder()
	// Each run waits for the run of the next item, so they complete in reverse order.
	gates := map[string]chan struct{}{}
	for _, it := range items {
		gates[it] = make(chan struct{})
	}
	b.AddNode("plan", func(context.Context, st) (graph.Update[st], error) { return graph.Update[st]{}, nil })
	b.AddNode("work", func(ctx context.Context, s st) (graph.Update[st], error) {
		i := slices.Index(items, s.Item)
		if i < len(items)-1 {
			select {
			case <-gates[items[i+1]]:
			case <-ctx.Done():
				return graph.Update[st]{}, ctx.Err()
			}
		}
		close(gates[s.Item])
		return graph.Updates(f.log.Set([]string{"done " + s.Item}), f.total.Set(1)), nil
	})
	b.AddEdge(graph.START, "plan")
	b.AddSends("plan", func(ctx context.Context, s st) ([]graph.Send[st], error) {
		var out []graph.Send[st]
		for _, it := range items {
			out = append(out, graph.Send[st]{Node: "work", State: st{Item: it}})
		}
		return out, nil
	})
	b.AddEdge("work", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	res, err := g.Invoke(ctxT(t), "t", graph.Update[st]{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"done i0", "done i1", "done i2", "done i3", "done i4"}
	if !slices.Equal(res.State.Log, want) || res.State.Total != 5 || res.Step != 2 {
		t.Fatalf("got %+v, want log %v, total 5 after 2 steps", res.State, want)
	}
}

// TestFailureKeepsSiblingWrites: when one node of a step fails, its
// siblings' writes are kept and Continue runs only the failed node.
func TestFailureKeepsSiblingWrites(t *testing.T) {
	b, f := newBuilder()
	var runs sync.Map // node -> *atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	count := func(n string) int32 {
		v, _ := runs.LoadOrStore(n, new(atomic.Int32))
		return v.(*atomic.Int32).Load()
	}
	node := func(name string) graph.NodeFunc[st] {
		return func(ctx context.Context, s st) (graph.Update[st], error) {
			v, _ := runs.LoadOrStore(name, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			info, _ := graph.Info(ctx)
			if name == "b" && fail.Load() {
				return graph.Update[st]{}, errors.New("boom")
			}
			if name == "b" && !info.Rerun {
				return graph.Update[st]{}, errors.New("b should see Rerun on its second run")
			}
			return graph.Updates(f.log.Set([]string{name})), nil
		}
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		b.AddNode(n, node(n))
	}
	b.AddEdge(graph.START, "a").AddEdge(graph.START, "b").AddEdge(graph.START, "c")
	b.AddEdge("a", "d").AddEdge("b", "d").AddEdge("c", "d").AddEdge("d", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)

	_, err := g.Invoke(ctx, "t", graph.Update[st]{})
	var ne *graph.NodeError
	if !errors.As(err, &ne) || ne.Node != "b" || ne.Step != 1 || !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("err = %v, want *NodeError for node b in step 1", err)
	}
	snap, err := g.State(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	cp := snap.Checkpoint
	if cp.Source != graph.SourcePartial || len(cp.Writes) != 2 || cp.Writes[0].Node != "a" || cp.Writes[1].Node != "c" {
		t.Fatalf("head after failure: source %q writes %+v; want partial with writes of a and c", cp.Source, cp.Writes)
	}
	if !slices.Equal(snap.Next, []string{"a", "b", "c"}) {
		t.Fatalf("next %v", snap.Next)
	}
	if _, err := g.Resume(ctx, "t", "x"); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("Resume without an interrupt: %v, want ErrNothingToResume", err)
	}

	fail.Store(false)
	res, err := g.Continue(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(res.State.Log, want) {
		t.Fatalf("log %v, want %v", res.State.Log, want)
	}
	for n, want := range map[string]int32{"a": 1, "b": 2, "c": 1, "d": 1} {
		if got := count(n); got != want {
			t.Errorf("node %s ran %d times, want %d", n, got, want)
		}
	}
	if _, err := g.Continue(ctx, "t"); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("Continue after END: %v, want ErrNothingToResume", err)
	}
}

// TestRecursionLimit: the limit counts super-steps per invocation.
func TestRecursionLimit(t *testing.T) {
	chain := func(n int) *graph.Builder[st] {
		b, f := newBuilder()
		prev := graph.START
		for i := range n {
			name := fmt.Sprintf("n%d", i)
			b.AddNode(name, func(ctx context.Context, s st) (graph.Update[st], error) {
				return graph.Updates(f.count.Set(s.Count + 1)), nil
			})
			b.AddEdge(prev, name)
			prev = name
		}
		return b.AddEdge(prev, graph.END)
	}
	loop := func() *graph.Builder[st] {
		b, f := newBuilder()
		b.AddNode("spin", func(ctx context.Context, s st) (graph.Update[st], error) {
			return graph.Updates(f.count.Set(s.Count + 1)), nil
		})
		b.AddEdge(graph.START, "spin").AddEdge("spin", "spin")
		return b
	}
	cases := []struct {
		name      string
		b         *graph.Builder[st]
		limit     int // 0: default
		wantLimit int // 0: no error
		wantCount int
	}{
		{"25 steps fit the default", chain(25), 0, 0, 25},
		{"26 steps do not", chain(26), 0, 25, 25},
		{"a cycle stops at the default", loop(), 0, 25, 25},
		{"a cycle stops at a custom limit", loop(), 3, 3, 3},
		{"custom limit large enough", chain(30), 30, 0, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := []graph.Option{graph.WithCheckpointer(graph.NewMemorySaver(0))}
			if tc.limit > 0 {
				opts = append(opts, graph.WithRecursionLimit(tc.limit))
			}
			g := mustCompile(t, tc.b, opts...)
			ctx := ctxT(t)
			res, err := g.Invoke(ctx, "t", graph.Update[st]{})
			if tc.wantLimit == 0 {
				if err != nil || res.State.Count != tc.wantCount {
					t.Fatalf("got %+v, %v; want count %d", res.State, err, tc.wantCount)
				}
				return
			}
			var re *graph.RecursionError
			if !errors.As(err, &re) || re.Limit != tc.wantLimit || !errors.Is(err, graph.ErrRecursionLimit) {
				t.Fatalf("err = %v, want *RecursionError{Limit: %d}", err, tc.wantLimit)
			}
			snap, err := g.State(ctx, "t")
			if err != nil || snap.State.Count != tc.wantCount || snap.Checkpoint.Step != tc.wantCount {
				t.Fatalf("checkpoint after the limit: %+v, %v; want count %d", snap.State, err, tc.wantCount)
			}
			// The limit is per invocation: Continue runs up to the limit again.
			if _, err := g.Continue(ctx, "t"); err == nil && tc.b != nil && snap.Next == nil {
				t.Fatal("Continue ran with nothing pending")
			}
			snap2, err := g.State(ctx, "t")
			if err != nil || snap2.Checkpoint.Step <= snap.Checkpoint.Step {
				t.Fatalf("Continue made no progress: step %d -> %d (%v)", snap.Checkpoint.Step, snap2.Checkpoint.Step, err)
			}
		})
	}
	if _, err := chain(1).Compile(graph.WithRecursionLimit(0)); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("WithRecursionLimit(0): %v, want ErrInvalidArgument", err)
	}
}

// TestInterruptResume: an interrupt pauses the graph; Resume re-runs the
// node from its start with the input; siblings are not run again.
func TestInterruptResume(t *testing.T) {
	type question struct {
		Text string `json:"text"`
	}
	b, f := newBuilder()
	var askRuns, sibRuns, afterRuns atomic.Int32
	var sawResuming atomic.Bool
	b.AddNode("ask", func(ctx context.Context, s st) (graph.Update[st], error) {
		askRuns.Add(1)
		var answer string
		ok, err := graph.ResumeInput(ctx, &answer)
		if err != nil {
			return graph.Update[st]{}, err
		}
		if !ok {
			return graph.Update[st]{}, graph.Interrupt(question{Text: "name?"})
		}
		info, _ := graph.Info(ctx)
		sawResuming.Store(info.Resuming && info.Rerun)
		return graph.Updates(f.name.Set(answer), f.log.Set([]string{"ask"})), nil
	})
	b.AddNode("sib", func(ctx context.Context, s st) (graph.Update[st], error) {
		sibRuns.Add(1)
		return graph.Updates(f.log.Set([]string{"sib"})), nil
	})
	b.AddNode("after", func(ctx context.Context, s st) (graph.Update[st], error) {
		afterRuns.Add(1)
		return graph.Updates(f.log.Set([]string{"hello " + s.Name})), nil
	})
	b.AddEdge(graph.START, "ask").AddEdge(graph.START, "sib").AddEdge("ask", "after").AddEdge("after", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)

	res, err := g.Invoke(ctx, "t", graph.Update[st]{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted() || len(res.Interrupts) != 1 || res.Interrupts[0].Node != "ask" || res.Interrupts[0].Task == "" {
		t.Fatalf("result %+v, want one interrupt of node ask", res)
	}
	var q question
	if err := res.Interrupts[0].Decode(&q); err != nil || q.Text != "name?" {
		t.Fatalf("interrupt value %+v, %v", q, err)
	}
	snap, err := g.State(ctx, "t")
	if err != nil || len(snap.Interrupts) != 1 || snap.Interrupts[0].Node != "ask" {
		t.Fatalf("checkpoint does not hold the interrupt: %+v, %v", snap.Interrupts, err)
	}
	if _, err := g.Continue(ctx, "t"); !errors.Is(err, graph.ErrWaitingForInput) {
		t.Fatalf("Continue while waiting: %v, want ErrWaitingForInput", err)
	}

	res, err = g.Resume(ctx, "t", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted() || res.State.Name != "Ada" {
		t.Fatalf("after resume: %+v", res)
	}
	if want := []string{"ask", "sib", "hello Ada"}; !slices.Equal(res.State.Log, want) {
		t.Fatalf("log %v, want %v", res.State.Log, want)
	}
	if askRuns.Load() != 2 || sibRuns.Load() != 1 || afterRuns.Load() != 1 || !sawResuming.Load() {
		t.Fatalf("runs ask=%d sib=%d after=%d resuming=%v; want 2, 1, 1, true",
			askRuns.Load(), sibRuns.Load(), afterRuns.Load(), sawResuming.Load())
	}
	if _, err := g.Resume(ctx, "t", "again"); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("Resume after END: %v, want ErrNothingToResume", err)
	}
}

// TestResumeInputRecorded: the resume input is checkpointed before the node
// runs, so a node that fails after getting it is finished by Continue with
// the same input, and a second input is refused.
func TestResumeInputRecorded(t *testing.T) {
	b, f := newBuilder()
	var fail atomic.Bool
	fail.Store(true)
	b.AddNode("ask", func(ctx context.Context, s st) (graph.Update[st], error) {
		var answer string
		ok, err := graph.ResumeInput(ctx, &answer)
		if err != nil || !ok {
			return graph.Update[st]{}, errors.Join(err, graph.Interrupt("q"))
		}
		if fail.Load() {
			return graph.Update[st]{}, errors.New("crashed after input")
		}
		return graph.Updates(f.name.Set(answer)), nil
	})
	b.AddEdge(graph.START, "ask").AddEdge("ask", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	if res, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil || !res.Interrupted() {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	if _, err := g.Resume(ctx, "t", "Bob"); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("resume: %v, want node failure", err)
	}
	if _, err := g.Resume(ctx, "t", "Eve"); !errors.Is(err, graph.ErrAlreadyResumed) {
		t.Fatalf("second input: %v, want ErrAlreadyResumed", err)
	}
	fail.Store(false)
	res, err := g.Continue(ctx, "t")
	if err != nil || res.State.Name != "Bob" {
		t.Fatalf("continue: %+v, %v; want name Bob", res.State, err)
	}
}

func TestRetry(t *testing.T) {
	errFlaky := errors.New("flaky")
	cases := []struct {
		name      string
		policy    graph.RetryPolicy
		failures  int   // attempts that fail before success
		err       error // error returned while failing
		panics    bool
		wantCalls int32
		wantErr   bool
	}{
		{"no policy: one attempt", graph.RetryPolicy{}, 1, errFlaky, false, 1, true},
		{"retries until success", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}, 2, errFlaky, false, 3, false},
		{"gives up after attempts", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}, 5, errFlaky, false, 3, true},
		{"permanent is not retried", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}, 5, graph.Permanent(errFlaky), false, 1, true},
		{"actor's permanent is not retried", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}, 5, actor.Permanent(errFlaky), false, 1, true},
		{"a permanent core code is not retried", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}, 5, core.Errorf(core.CodeInvalid, "op", "bad: %w", errFlaky), false, 1, true},
		{"RetryOn filters", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond, RetryOn: func(err error) bool { return !errors.Is(err, errFlaky) }}, 5, errFlaky, false, 1, true},
		{"panic is not retried", graph.RetryPolicy{Attempts: 3, Backoff: time.Millisecond}, 5, nil, true, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, f := newBuilder()
			var calls atomic.Int32
			var lastAttempt atomic.Int32
			b.AddNode("n", func(ctx context.Context, s st) (graph.Update[st], error) {
				n := calls.Add(1)
				info, _ := graph.Info(ctx)
				lastAttempt.Store(int32(info.Attempt))
				if int(n) <= tc.failures {
					if tc.panics {
						panic("kaboom")
					}
					return graph.Update[st]{}, tc.err
				}
				return graph.Updates(f.count.Set(1)), nil
			}, graph.WithRetry(tc.policy))
			b.AddEdge(graph.START, "n")
			g := mustCompile(t, b)
			res, err := g.Invoke(ctxT(t), "", graph.Update[st]{})
			if calls.Load() != tc.wantCalls || lastAttempt.Load() != tc.wantCalls {
				t.Fatalf("calls %d (last attempt %d), want %d", calls.Load(), lastAttempt.Load(), tc.wantCalls)
			}
			if !tc.wantErr {
				if err != nil || res.State.Count != 1 {
					t.Fatalf("got %+v, %v", res.State, err)
				}
				return
			}
			var ne *graph.NodeError
			if !errors.As(err, &ne) || ne.Attempts != int(tc.wantCalls) {
				t.Fatalf("err = %v, want *NodeError after %d attempts", err, tc.wantCalls)
			}
			var pe *graph.PanicError
			if tc.panics != errors.As(err, &pe) {
				t.Fatalf("panic error: %v (want panic: %v)", err, tc.panics)
			}
			if tc.err != nil && !errors.Is(err, errFlaky) {
				t.Fatalf("err %v does not wrap the node's error", err)
			}
		})
	}
	b, _ := newBuilder()
	b.AddNode("n", logNode(fields{}, "n"), graph.WithRetry(graph.RetryPolicy{Attempts: -1}))
	b.AddEdge(graph.START, "n")
	if _, err := b.Compile(); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("negative attempts: %v, want ErrInvalidArgument", err)
	}
}

func TestStream(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("a", logNode(f, "a"))
	b.AddNode("b", logNode(f, "b"))
	b.AddNode("c", logNode(f, "c"))
	b.AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("a", "c").AddEdge("b", graph.END).AddEdge("c", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)

	var steps []int
	var nodes [][]string
	var lastLog []string
	for ev, err := range g.Stream(ctx, "t", graph.Update[st]{}) {
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, ev.Step)
		nodes = append(nodes, ev.Nodes)
		lastLog = ev.State.Log
		for _, w := range ev.Writes {
			if w.Field != "log" || !slices.Contains(ev.Nodes, w.Node) {
				t.Fatalf("step %d write %+v", ev.Step, w)
			}
		}
		if ev.Checkpoint == "" {
			t.Fatal("event without checkpoint id")
		}
	}
	if !slices.Equal(steps, []int{1, 2}) || !slices.Equal(nodes[0], []string{"a"}) || !slices.Equal(nodes[1], []string{"b", "c"}) {
		t.Fatalf("steps %v nodes %v", steps, nodes)
	}
	if !slices.Equal(lastLog, []string{"a", "b", "c"}) {
		t.Fatalf("final state log %v", lastLog)
	}

	// A cancelled context ends the stream with the context's error.
	b2, f2 := newBuilder()
	b2.AddNode("spin", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f2.count.Set(s.Count + 1)), nil
	})
	b2.AddEdge(graph.START, "spin").AddEdge("spin", "spin")
	g2 := mustCompile(t, b2, graph.WithRecursionLimit(1000))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	var endErr error
	for ev, err := range g2.Stream(cctx, "", graph.Update[st]{}) {
		if err != nil {
			endErr = err
			break
		}
		n++
		if ev.Step == 3 {
			cancel()
		}
	}
	if n != 3 || !errors.Is(endErr, context.Canceled) {
		t.Fatalf("after cancel: %d events, err %v; want 3 and context.Canceled", n, endErr)
	}

	// Breaking the loop stops the run after the step in progress.
	n = 0
	for _, err := range g2.Stream(ctx, "", graph.Update[st]{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("break: %d events", n)
	}

	// A paused run ends with an event carrying the interrupt.
	b3, _ := newBuilder()
	b3.AddNode("ask", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Update[st]{}, graph.Interrupt("q")
	})
	b3.AddEdge(graph.START, "ask")
	g3 := mustCompile(t, b3, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	var last graph.Event[st]
	for ev, err := range g3.Stream(ctx, "t", graph.Update[st]{}) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if len(last.Interrupts) != 1 || last.Interrupts[0].Node != "ask" {
		t.Fatalf("last event %+v, want the interrupt", last)
	}
}

// TestOneWriterPerThread: two concurrent runs of one thread: the second
// gets a *ConflictError; so does a stale writer of the checkpointer.
func TestOneWriterPerThread(t *testing.T) {
	b, f := newBuilder()
	entered := make(chan struct{})
	release := make(chan struct{})
	b.AddNode("slow", func(ctx context.Context, s st) (graph.Update[st], error) {
		if s.Name == "first" {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return graph.Update[st]{}, ctx.Err()
			}
		}
		return graph.Updates(f.count.Set(s.Count + 1)), nil
	})
	b.AddEdge(graph.START, "slow")
	saver := graph.NewMemorySaver(0)
	g := mustCompile(t, b, graph.WithCheckpointer(saver))
	ctx := ctxT(t)
	errc := make(chan error, 1)
	go func() {
		_, err := g.Invoke(ctx, "t", graph.Updates(f.name.Set("first")))
		errc <- err
	}()
	<-entered
	_, err := g.Invoke(ctx, "t", graph.Updates(f.name.Set("second")))
	var ce *graph.ConflictError
	if !errors.As(err, &ce) || ce.Thread != "t" || !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("second run: %v, want *ConflictError", err)
	}
	// Another process (another compiled graph on the same store) loses at its first write.
	g2 := mustCompile(t, b, graph.WithCheckpointer(saver))
	if _, err := g2.Invoke(ctx, "t", graph.Updates(f.name.Set("third"))); err != nil {
		t.Fatalf("other process: %v", err)
	}
	close(release)
	if err := <-errc; !errors.Is(err, graph.ErrConflict) {
		t.Fatalf("first run after the head moved: %v, want ErrConflict", err)
	}
	hist, err := g.History(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range hist { // linear: each checkpoint's parent is the next older one
		if i+1 < len(hist) && s.Checkpoint.Parent != hist[i+1].Checkpoint.ID {
			t.Fatalf("history forked at %s: parent %s", s.Checkpoint.ID, s.Checkpoint.Parent)
		}
	}
}

func TestHistoryForkUpdateState(t *testing.T) {
	b, f := newBuilder()
	for _, n := range []string{"a", "b", "c"} {
		b.AddNode(n, func(ctx context.Context, s st) (graph.Update[st], error) {
			return graph.Updates(f.log.Set([]string{n}), f.count.Set(s.Count+1)), nil
		})
	}
	b.AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil {
		t.Fatal(err)
	}
	hist, err := g.History(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, h := range hist {
		steps = append(steps, h.Checkpoint.Step)
	}
	if !slices.Equal(steps, []int{3, 2, 1, 0}) || hist[3].Checkpoint.Source != graph.SourceInput || hist[0].Checkpoint.Source != graph.SourceLoop {
		t.Fatalf("history steps %v", steps)
	}
	if h2, err := g.History(ctx, "t", 2); err != nil || len(h2) != 2 || h2[0].Checkpoint.Step != 3 {
		t.Fatalf("History limit 2: %d, %v", len(h2), err)
	}
	// Fork after step 1 (next: b) into a new thread and run it with an edit.
	at1 := hist[2]
	if !slices.Equal(at1.Next, []string{"b"}) {
		t.Fatalf("checkpoint of step 1 next %v", at1.Next)
	}
	fk, err := g.Fork(ctx, "t", at1.Checkpoint.ID, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if fk.Checkpoint.Source != graph.SourceFork || fk.Checkpoint.ForkOf != "t/"+at1.Checkpoint.ID || fk.Checkpoint.Seq != 1 {
		t.Fatalf("fork checkpoint %+v", fk.Checkpoint)
	}
	if _, err := g.UpdateState(ctx, "t2", graph.Updates(f.log.Set([]string{"edit"}))); err != nil {
		t.Fatal(err)
	}
	res, err := g.Continue(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "edit", "b", "c"}; !slices.Equal(res.State.Log, want) || res.State.Count != 3 {
		t.Fatalf("forked run %+v, want log %v", res.State, want)
	}
	// The original thread is untouched; forking in place rewinds it.
	orig, err := g.State(ctx, "t")
	if err != nil || !slices.Equal(orig.State.Log, []string{"a", "b", "c"}) {
		t.Fatalf("original %+v, %v", orig.State, err)
	}
	if _, err := g.Fork(ctx, "t", hist[1].Checkpoint.ID, ""); err != nil {
		t.Fatal(err)
	}
	res, err = g.Continue(ctx, "t")
	if err != nil || !slices.Equal(res.State.Log, []string{"a", "b", "c"}) || res.Step != 4 {
		t.Fatalf("rewound run %+v, %v; want step 4 (the fork of step 2 at step 3, then c)", res, err)
	}
	if _, err := g.Fork(ctx, "t", "nope", ""); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("fork of unknown checkpoint: %v", err)
	}
}

// TestRetention: the memory saver keeps the latest N checkpoints of a thread.
func TestRetention(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("spin", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f.log.Set([]string{"x"}), f.count.Set(s.Count+1)), nil
	})
	b.AddEdge(graph.START, "spin")
	b.AddConditionalEdges("spin", func(ctx context.Context, s st) (string, error) {
		if s.Count < 20 {
			return "spin", nil
		}
		return graph.END, nil
	}, "spin", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(5)))
	ctx := ctxT(t)
	if _, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil {
		t.Fatal(err)
	}
	hist, err := g.History(ctx, "t", 0)
	if err != nil || len(hist) != 5 || hist[0].Checkpoint.Step != 20 || hist[4].Checkpoint.Step != 16 {
		t.Fatalf("history len %d (%v), want the last 5 checkpoints", len(hist), err)
	}
}

func TestRouting(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("route", logNode(f, "route"))
	b.AddNode("even", logNode(f, "even"))
	b.AddNode("odd", logNode(f, "odd"))
	b.AddNode("jump", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f.log.Set([]string{"jump"})).Goto("odd"), nil
	})
	b.AddEdge(graph.START, "route")
	b.AddConditionalEdges("route", func(ctx context.Context, s st) (string, error) {
		switch s.Count {
		case 0:
			return "even", nil
		case 1:
			return "odd", nil
		case 2:
			return "jump", nil
		}
		return "nowhere", nil
	}, "even", "odd", "jump")
	b.AddEdge("jump", "even") // replaced by Goto
	g := mustCompile(t, b)
	cases := []struct {
		count   int
		want    []string
		wantErr error
	}{
		{0, []string{"route", "even"}, nil},
		{1, []string{"route", "odd"}, nil},
		{2, []string{"route", "jump", "odd"}, nil},
		{3, nil, graph.ErrInvalidUpdate},
	}
	for _, tc := range cases {
		res, err := g.Invoke(ctxT(t), "", graph.Updates(f.count.Set(tc.count)))
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("count %d: err %v, want %v", tc.count, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(res.State.Log, tc.want) {
			t.Fatalf("count %d: log %v (%v), want %v", tc.count, res.State.Log, err, tc.want)
		}
	}
}

func TestMergeStateReducer(t *testing.T) {
	b := graph.New[st]()
	b.StateReducer(func(cur, upd st) st {
		cur.Total += upd.Total
		cur.Log = graph.Append(cur.Log, upd.Log)
		return cur
	})
	for _, n := range []string{"a", "b"} {
		b.AddNode(n, func(ctx context.Context, s st) (graph.Update[st], error) {
			return graph.Merge(st{Total: 2, Log: []string{n}}), nil
		})
		b.AddEdge(graph.START, n)
	}
	g := mustCompile(t, b)
	res, err := g.Invoke(ctxT(t), "", graph.Update[st]{})
	if err != nil || res.State.Total != 4 || !slices.Equal(res.State.Log, []string{"a", "b"}) {
		t.Fatalf("%+v, %v", res.State, err)
	}
}

func TestCompileErrors(t *testing.T) {
	noop := func(context.Context, st) (graph.Update[st], error) { return graph.Update[st]{}, nil }
	cases := []struct {
		name  string
		build func(b *graph.Builder[st])
		opts  []graph.Option
	}{
		{"no entry", func(b *graph.Builder[st]) { b.AddNode("a", noop) }, nil},
		{"bad node name", func(b *graph.Builder[st]) { b.AddNode("a.b", noop).AddEdge(graph.START, "a.b") }, nil},
		{"duplicate node", func(b *graph.Builder[st]) { b.AddNode("a", noop).AddNode("a", noop).AddEdge(graph.START, "a") }, nil},
		{"nil node", func(b *graph.Builder[st]) { b.AddNode("a", nil).AddEdge(graph.START, "a") }, nil},
		{"edge to unknown", func(b *graph.Builder[st]) { b.AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", "zz") }, nil},
		{"edge from unknown", func(b *graph.Builder[st]) { b.AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("zz", "a") }, nil},
		{"edge into START", func(b *graph.Builder[st]) { b.AddNode("a", noop).AddEdge(graph.START, "a").AddEdge("a", graph.START) }, nil},
		{"router target unknown", func(b *graph.Builder[st]) {
			b.AddNode("a", noop).AddEdge(graph.START, "a").AddConditionalEdges("a", func(context.Context, st) (string, error) { return "", nil }, "zz")
		}, nil},
		{"duplicate field", func(b *graph.Builder[st]) {
			graph.Plain(b, "count", func(s *st) *int { return &s.Count })
			b.AddNode("a", noop).AddEdge(graph.START, "a")
		}, nil},
		{"nil checkpointer", func(b *graph.Builder[st]) { b.AddNode("a", noop).AddEdge(graph.START, "a") }, []graph.Option{graph.WithCheckpointer(nil)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBuilder()
			tc.build(b)
			if _, err := b.Compile(tc.opts...); !errors.Is(err, graph.ErrInvalidGraph) && !errors.Is(err, graph.ErrInvalidArgument) {
				t.Fatalf("Compile: %v, want ErrInvalidGraph or ErrInvalidArgument", err)
			}
		})
	}
}

func TestThreadArguments(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("a", logNode(f, "a")).AddEdge(graph.START, "a")
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	for _, th := range []string{"", "a.b", "x y"} {
		if _, err := g.Invoke(ctx, th, graph.Update[st]{}); !errors.Is(err, graph.ErrInvalidArgument) {
			t.Fatalf("thread %q: %v, want ErrInvalidArgument", th, err)
		}
	}
	if _, err := g.State(ctx, "unknown"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("State of unknown thread: %v", err)
	}
	g2 := mustCompile(t, b)
	if _, err := g2.Resume(ctx, "t", 1); !errors.Is(err, graph.ErrNoCheckpointer) {
		t.Fatalf("Resume without checkpointer: %v", err)
	}
	// A write to a field of another builder is refused.
	other, of := newBuilder()
	_ = other
	b3, _ := newBuilder()
	b3.AddNode("a", func(context.Context, st) (graph.Update[st], error) {
		return graph.Updates(of.count.Set(1)), nil
	}).AddEdge(graph.START, "a")
	g3 := mustCompile(t, b3)
	if _, err := g3.Invoke(ctx, "", graph.Update[st]{}); !errors.Is(err, graph.ErrInvalidUpdate) {
		t.Fatalf("foreign field: %v", err)
	}
}

// TestResumeForTask: two nodes wait in one step (two remote workers); each
// is resumed on its own with its own input; the step completes after the
// last, applying updates in node order; a waiting node is never re-run.
func TestResumeForTask(t *testing.T) {
	b, f := newBuilder()
	runs := map[string]*atomic.Int32{"w1": {}, "w2": {}}
	worker := func(name string) graph.NodeFunc[st] {
		return func(ctx context.Context, s st) (graph.Update[st], error) {
			runs[name].Add(1)
			var result string
			ok, err := graph.ResumeInput(ctx, &result)
			if err != nil {
				return graph.Update[st]{}, err
			}
			if !ok {
				info, _ := graph.Info(ctx)
				return graph.Update[st]{}, graph.Interrupt("task " + info.Task) // published here
			}
			return graph.Updates(f.log.Set([]string{name + "=" + result})), nil
		}
	}
	b.AddNode("w1", worker("w1")).AddNode("w2", worker("w2")).AddNode("join", logNode(f, "join"))
	b.AddEdge(graph.START, "w1").AddEdge(graph.START, "w2").AddEdge("w1", "join").AddEdge("w2", "join")
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	res, err := g.Invoke(ctx, "t", graph.Update[st]{})
	if err != nil || len(res.Interrupts) != 2 {
		t.Fatalf("invoke: %+v, %v; want 2 interrupts", res, err)
	}
	w1, w2 := res.Interrupts[0], res.Interrupts[1]
	if w1.Node != "w1" || w2.Node != "w2" || w1.Task == w2.Task {
		t.Fatalf("interrupts %+v", res.Interrupts)
	}
	if _, err := g.Resume(ctx, "t", "x", graph.ForTask("no-such-task")); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("unknown task: %v", err)
	}
	res, err = g.Resume(ctx, "t", "B", graph.ForTask(w2.Task))
	if err != nil || len(res.Interrupts) != 1 || res.Interrupts[0].Task != w1.Task {
		t.Fatalf("after resuming w2: %+v, %v; want w1 still waiting", res, err)
	}
	if _, err := g.Continue(ctx, "t"); !errors.Is(err, graph.ErrWaitingForInput) {
		t.Fatalf("continue while w1 waits: %v", err)
	}
	if _, err := g.Resume(ctx, "t", "B2", graph.ForTask(w2.Task)); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("resuming w2 twice: %v", err)
	}
	res, err = g.Resume(ctx, "t", "A", graph.ForTask(w1.Task))
	if err != nil || res.Interrupted() {
		t.Fatalf("after resuming w1: %+v, %v", res, err)
	}
	if want := []string{"w1=A", "w2=B", "join"}; !slices.Equal(res.State.Log, want) {
		t.Fatalf("log %v, want %v", res.State.Log, want)
	}
	if runs["w1"].Load() != 2 || runs["w2"].Load() != 2 {
		t.Fatalf("runs w1=%d w2=%d, want 2 each (publish, then resume)", runs["w1"].Load(), runs["w2"].Load())
	}
}

// TestStreamResumeContinue: the streaming forms of Resume and Continue.
func TestStreamResumeContinue(t *testing.T) {
	b, f := newBuilder()
	var fail atomic.Bool
	fail.Store(true)
	b.AddNode("ask", func(ctx context.Context, s st) (graph.Update[st], error) {
		var in string
		ok, err := graph.ResumeInput(ctx, &in)
		if err != nil {
			return graph.Update[st]{}, err
		}
		if !ok {
			return graph.Update[st]{}, graph.Interrupt("?")
		}
		return graph.Updates(f.name.Set(in)), nil
	})
	b.AddNode("flaky", func(ctx context.Context, s st) (graph.Update[st], error) {
		if fail.Load() {
			return graph.Update[st]{}, errors.New("not yet")
		}
		return graph.Updates(f.log.Set([]string{"flaky " + s.Name})), nil
	})
	b.AddEdge(graph.START, "ask").AddEdge("ask", "flaky").AddEdge("flaky", graph.END)
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	if res, err := g.Invoke(ctx, "t", graph.Update[st]{}); err != nil || !res.Interrupted() {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	var steps []int
	var endErr error
	for ev, err := range g.StreamResume(ctx, "t", "Ada") {
		if err != nil {
			endErr = err
			break
		}
		steps = append(steps, ev.Step)
	}
	if !slices.Equal(steps, []int{1}) || !errors.Is(endErr, graph.ErrNodeFailed) {
		t.Fatalf("stream resume: steps %v, err %v; want step 1 then flaky's failure", steps, endErr)
	}
	fail.Store(false)
	var last graph.Event[st]
	for ev, err := range g.StreamContinue(ctx, "t") {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Step != 2 || !slices.Equal(last.State.Log, []string{"flaky Ada"}) {
		t.Fatalf("stream continue: last event %+v", last)
	}
	for _, err := range g.StreamContinue(ctx, "t") {
		if !errors.Is(err, graph.ErrNothingToResume) {
			t.Fatalf("stream continue at END: %v", err)
		}
	}
}

// TestResumeEach: several interrupts resumed in one call, each with its own
// input; one left out stays paused.
func TestResumeEach(t *testing.T) {
	b, f := newBuilder()
	var runs atomic.Int32
	worker := func(name string) graph.NodeFunc[st] {
		return func(ctx context.Context, s st) (graph.Update[st], error) {
			runs.Add(1)
			var in string
			ok, err := graph.ResumeInput(ctx, &in)
			if err != nil {
				return graph.Update[st]{}, err
			}
			if !ok {
				return graph.Update[st]{}, graph.Interrupt(name)
			}
			return graph.Updates(f.log.Set([]string{name + "=" + in})), nil
		}
	}
	b.AddNode("w1", worker("w1")).AddNode("w2", worker("w2")).AddNode("w3", worker("w3"))
	b.AddEdge(graph.START, "w1").AddEdge(graph.START, "w2").AddEdge(graph.START, "w3")
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	res, err := g.Invoke(ctx, "t", graph.Update[st]{})
	if err != nil || len(res.Interrupts) != 3 {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	task := map[string]string{}
	for _, in := range res.Interrupts {
		task[in.Node] = in.Task
	}
	if _, err := g.ResumeEach(ctx, "t", nil); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("no inputs: %v", err)
	}
	if _, err := g.ResumeEach(ctx, "t", map[string]any{"nope": 1}); !errors.Is(err, graph.ErrNothingToResume) {
		t.Fatalf("unknown task: %v", err)
	}
	res, err = g.ResumeEach(ctx, "t", map[string]any{task["w3"]: "C", task["w1"]: "A"})
	if err != nil || len(res.Interrupts) != 1 || res.Interrupts[0].Node != "w2" {
		t.Fatalf("after resuming w1 and w3: %+v, %v", res, err)
	}
	res, err = g.ResumeEach(ctx, "t", map[string]any{task["w2"]: "B"})
	if err != nil || res.Interrupted() {
		t.Fatalf("after resuming w2: %+v, %v", res, err)
	}
	if want := []string{"w1=A", "w2=B", "w3=C"}; !slices.Equal(res.State.Log, want) {
		t.Fatalf("log %v, want %v", res.State.Log, want)
	}
	if runs.Load() != 6 {
		t.Fatalf("%d node runs, want 6 (each paused once, resumed once)", runs.Load())
	}
}
