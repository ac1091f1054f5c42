// Package graphtest is the conformance suite of graph.Checkpointer: one
// function, Run, that every checkpointer must pass, with a Features struct
// declaring what the implementation under test is configured to do.
//
//	func TestConformance(t *testing.T) {
//		graphtest.Run(t, func(t *testing.T) graph.Checkpointer {
//			return graph.NewMemorySaver(graphtest.Retention)
//		}, graphtest.Features{Retention: graphtest.Retention})
//	}
package graphtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/codec"
)

// Retention is a convenient retention to configure checkpointers under test with.
const Retention = 5

// Features declares how the checkpointer under test is configured.
type Features struct {
	// Retention is the number of checkpoints per thread the checkpointer
	// keeps (required, at least 2).
	Retention int
	// PruneSlack is how many checkpoints beyond Retention the store may
	// still hold (and Get may still return) before it prunes; List must
	// return exactly Retention. 0 for a store that prunes on every Put.
	PruneSlack int
	// MaxSize, when above 0, is a checkpoint size the store refuses with
	// graph.ErrTooLarge before writing anything.
	MaxSize int
}

// Run runs the conformance suite. newSaver returns a fresh, empty
// checkpointer configured as f says; each subtest calls it once.
func Run(t *testing.T, newSaver func(t *testing.T) graph.Checkpointer, f Features) {
	t.Helper()
	if f.Retention < 2 {
		t.Fatalf("graphtest: Features.Retention must be at least 2, got %d", f.Retention)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s graph.Checkpointer, f Features)
	}{
		{"PutGet", testPutGet},
		{"CompareAndSet", testCompareAndSet},
		{"ConcurrentWriters", testConcurrentWriters},
		{"NotFound", testNotFound},
		{"ListNewestFirst", testList},
		{"Retention", testRetention},
		{"Delete", testDelete},
		{"ThreadsIsolated", testIsolated},
		{"InvalidArguments", testInvalid},
		{"TooLarge", testTooLarge},
		{"CancelledContext", testCancelled},
		{"EngineAcrossInstances", testEngine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newSaver(t), f)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cp makes a checkpoint of thread with sequence seq and some content.
func cp(thread string, seq uint64) graph.Checkpoint {
	state, _ := codec.Marshal(struct {
		N uint64 `json:"n"`
		S string `json:"s"`
	}{seq, fmt.Sprintf("state %d", seq)})
	c := graph.Checkpoint{
		Thread: thread, Seq: seq, ID: graph.FormatID(seq), Source: graph.SourceLoop,
		Step: int(seq) - 1, Created: time.Unix(1700000000, int64(seq)*1000).UTC(), State: state,
		Next: []graph.Task{{ID: fmt.Sprintf("%s:%d:0", thread, seq), Node: "a"}, {ID: fmt.Sprintf("%s:%d:1", thread, seq), Node: "b", Arg: []byte{0x80}, Send: true}},
		Writes: []graph.PendingWrite{{Task: fmt.Sprintf("%s:%d:0", thread, seq), Node: "a",
			Fields: []graph.FieldValue{{Field: "count", Value: []byte{0x01}}}, Output: []byte{0x80}, Goto: []string{"c"}, Routed: true}},
		Interrupts: []graph.Interruption{{Node: "b", Task: fmt.Sprintf("%s:%d:1", thread, seq), Value: []byte{0xa1, 'q'},
			ID: fmt.Sprintf("%s:%d:1#1", thread, seq), Index: 1, Namespace: "sub:x:1:0", Answers: [][]byte{{0xa1, 'a'}}}},
		Memos: []graph.Memo{{Task: fmt.Sprintf("%s:%d:0", thread, seq), Values: [][]byte{{0x07}, {0xa1, 'm'}}}},
	}
	if seq > 1 {
		c.Parent = graph.FormatID(seq - 1)
	}
	return c
}

// put writes n checkpoints to thread and returns the last version.
func put(t *testing.T, ctx context.Context, s graph.Checkpointer, thread string, n int) uint64 {
	t.Helper()
	var v uint64
	for i := 1; i <= n; i++ {
		nv, err := s.Put(ctx, cp(thread, uint64(i)), v)
		if err != nil {
			t.Fatalf("Put %s #%d: %v", thread, i, err)
		}
		if nv == 0 || nv == v {
			t.Fatalf("Put %s #%d returned version %d after %d", thread, i, nv, v)
		}
		v = nv
	}
	return v
}

func same(t *testing.T, got, want graph.Checkpoint) {
	t.Helper()
	if got.Thread != want.Thread || got.ID != want.ID || got.Seq != want.Seq || got.Parent != want.Parent ||
		got.ForkOf != want.ForkOf || got.Source != want.Source || got.Step != want.Step ||
		!got.Created.Equal(want.Created) || !bytes.Equal(got.State, want.State) ||
		fmt.Sprint(got.Next) != fmt.Sprint(want.Next) || fmt.Sprint(got.Writes) != fmt.Sprint(want.Writes) ||
		fmt.Sprint(got.Interrupts) != fmt.Sprint(want.Interrupts) || fmt.Sprint(got.Memos) != fmt.Sprint(want.Memos) {
		t.Fatalf("checkpoint read back differs:\n got %+v\nwant %+v", got, want)
	}
}

func testPutGet(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	v1, err := s.Put(ctx, cp("t", 1), 0)
	if err != nil || v1 == 0 {
		t.Fatalf("first Put: %d, %v", v1, err)
	}
	head, err := s.Get(ctx, "t", "")
	if err != nil {
		t.Fatal(err)
	}
	same(t, head, cp("t", 1))
	if head.Version != v1 {
		t.Fatalf("head version %d, Put returned %d", head.Version, v1)
	}
	v2, err := s.Put(ctx, cp("t", 2), head.Version)
	if err != nil {
		t.Fatal(err)
	}
	byID, err := s.Get(ctx, "t", graph.FormatID(1))
	if err != nil {
		t.Fatal(err)
	}
	same(t, byID, cp("t", 1))
	head, err = s.Get(ctx, "t", "")
	if err != nil || head.Seq != 2 || head.Version != v2 {
		t.Fatalf("head after second Put: seq %d version %d (%v), want 2 and %d", head.Seq, head.Version, err, v2)
	}
}

func testCompareAndSet(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	v1 := put(t, ctx, s, "t", 1)
	conflict := func(what string, c graph.Checkpoint, head uint64) {
		t.Helper()
		_, err := s.Put(ctx, c, head)
		var ce *graph.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, graph.ErrConflict) || ce.Thread != "t" {
			t.Fatalf("%s: %v, want *graph.ConflictError for thread t", what, err)
		}
	}
	conflict("a new thread's first checkpoint again", cp("t", 1), 0)
	conflict("next checkpoint against a made-up version", cp("t", 2), v1+1000)
	v2, err := s.Put(ctx, cp("t", 2), v1)
	if err != nil {
		t.Fatal(err)
	}
	conflict("a stale writer", cp("t", 3), v1)
	head, err := s.Get(ctx, "t", "")
	if err != nil || head.Seq != 2 || head.Version != v2 {
		t.Fatalf("head after conflicts: seq %d (%v)", head.Seq, err)
	}
	same(t, head, cp("t", 2))
}

func testConcurrentWriters(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	v1 := put(t, ctx, s, "t", 1)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cp("t", 2)
			c.Source = fmt.Sprintf("writer-%d", i)
			_, errs[i] = s.Put(ctx, c, v1)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatalf("writers %d and %d both won", won, i)
			}
			won = i
		case !errors.Is(err, graph.ErrConflict):
			t.Fatalf("writer %d: %v, want a conflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer won")
	}
	head, err := s.Get(ctx, "t", "")
	if err != nil || head.Source != fmt.Sprintf("writer-%d", won) {
		t.Fatalf("head %q (%v), want the winner writer-%d", head.Source, err, won)
	}
	hist, err := s.List(ctx, "t", 0)
	if err != nil || len(hist) != 2 {
		t.Fatalf("history has %d checkpoints (%v), want 2", len(hist), err)
	}
}

func testNotFound(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	if _, err := s.Get(ctx, "nobody", ""); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("Get head of unknown thread: %v, want ErrNotFound", err)
	}
	put(t, ctx, s, "t", 1)
	if _, err := s.Get(ctx, "t", graph.FormatID(7)); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("Get unknown id: %v, want ErrNotFound", err)
	}
	l, err := s.List(ctx, "nobody", 0)
	if err != nil || len(l) != 0 {
		t.Fatalf("List unknown thread: %d, %v", len(l), err)
	}
}

func testList(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	put(t, ctx, s, "t", f.Retention)
	all, err := s.List(ctx, "t", 0)
	if err != nil || len(all) != f.Retention {
		t.Fatalf("List: %d, %v; want %d", len(all), err, f.Retention)
	}
	for i, c := range all {
		same(t, c, cp("t", uint64(f.Retention-i)))
	}
	two, err := s.List(ctx, "t", 2)
	if err != nil || len(two) != 2 || two[0].Seq != uint64(f.Retention) || two[1].Seq != uint64(f.Retention-1) {
		t.Fatalf("List limit 2: %d, %v", len(two), err)
	}
	if _, err := s.List(ctx, "t", -1); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("List limit -1: %v, want ErrInvalidArgument", err)
	}
}

func testRetention(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	n := f.Retention + f.PruneSlack + 3
	put(t, ctx, s, "t", n)
	all, err := s.List(ctx, "t", 0)
	if err != nil || len(all) != f.Retention {
		t.Fatalf("List after %d puts: %d, %v; want %d", n, len(all), err, f.Retention)
	}
	if all[0].Seq != uint64(n) || all[len(all)-1].Seq != uint64(n-f.Retention+1) {
		t.Fatalf("kept %d..%d, want the newest", all[len(all)-1].Seq, all[0].Seq)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if _, err := s.Get(ctx, "t", graph.FormatID(seq)); !errors.Is(err, graph.ErrNotFound) {
			t.Fatalf("checkpoint %d of %d with retention %d (slack %d) still readable: %v", seq, n, f.Retention, f.PruneSlack, err)
		}
	}
}

func testDelete(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	put(t, ctx, s, "t", 3)
	put(t, ctx, s, "u", 1)
	if err := s.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "t", ""); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if l, err := s.List(ctx, "t", 0); err != nil || len(l) != 0 {
		t.Fatalf("List after Delete: %d, %v", len(l), err)
	}
	if _, err := s.Get(ctx, "u", ""); err != nil {
		t.Fatalf("Delete touched another thread: %v", err)
	}
	put(t, ctx, s, "t", 2) // a deleted thread starts again from version 0
	if err := s.Delete(ctx, "never"); err != nil {
		t.Fatalf("Delete of an unknown thread: %v", err)
	}
}

func testIsolated(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	threads := []string{"a", "ab", "a-b", "a_b", "A"}
	for i, th := range threads {
		put(t, ctx, s, th, i+1)
	}
	for i, th := range threads {
		l, err := s.List(ctx, th, 0)
		if err != nil || len(l) != min(i+1, f.Retention) {
			t.Fatalf("thread %q: %d checkpoints (%v), want %d", th, len(l), err, min(i+1, f.Retention))
		}
		for _, c := range l {
			if c.Thread != th {
				t.Fatalf("thread %q lists a checkpoint of %q", th, c.Thread)
			}
		}
	}
}

func testInvalid(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	bad := []graph.Checkpoint{cp("a.b", 1), cp("", 1), cp("a b", 1), cp("a*", 1)}
	c := cp("t", 1)
	c.ID = "x"
	bad = append(bad, c)
	c = cp("t", 1)
	c.Seq, c.ID = 0, graph.FormatID(0)
	bad = append(bad, c)
	for _, c := range bad {
		if _, err := s.Put(ctx, c, 0); !errors.Is(err, graph.ErrInvalidArgument) {
			t.Fatalf("Put thread %q id %q seq %d: %v, want ErrInvalidArgument", c.Thread, c.ID, c.Seq, err)
		}
	}
	c = cp("t", 3) // a first checkpoint must have Seq 1
	if _, err := s.Put(ctx, c, 0); err == nil {
		t.Fatal("Put of seq 3 as a thread's first checkpoint succeeded")
	}
}

func testTooLarge(t *testing.T, s graph.Checkpointer, f Features) {
	if f.MaxSize <= 0 {
		return
	}
	ctx := ctxT(t)
	v := put(t, ctx, s, "t", 1)
	c := cp("t", 2)
	c.State = bytes.Repeat([]byte{0xc0}, f.MaxSize+1)
	_, err := s.Put(ctx, c, v)
	var te *graph.TooLargeError
	if !errors.As(err, &te) || !errors.Is(err, graph.ErrTooLarge) || te.Size <= f.MaxSize || te.Thread != "t" {
		t.Fatalf("Put of a %d-byte state: %v, want *graph.TooLargeError", len(c.State), err)
	}
	head, err := s.Get(ctx, "t", "")
	if err != nil || head.Seq != 1 {
		t.Fatalf("head after a refused Put: seq %d, %v", head.Seq, err)
	}
	if _, err := s.Put(ctx, cp("t", 2), v); err != nil {
		t.Fatalf("Put after a refused one: %v", err)
	}
}

func testCancelled(t *testing.T, s graph.Checkpointer, f Features) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, cp("t", 1), 0); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	if _, err := s.Get(ctx, "t", ""); err == nil {
		t.Fatal("Get with a cancelled context succeeded")
	}
}

type engineState struct {
	Log    []string `json:"log"`
	Answer string   `json:"answer"`
}

// testEngine runs a graph that fails, is continued, interrupts and is
// resumed, each time by a fresh compiled graph (as another process would).
func testEngine(t *testing.T, s graph.Checkpointer, f Features) {
	ctx := ctxT(t)
	var mu sync.Mutex
	failB := true
	compile := func() *graph.Graph[engineState] {
		b := graph.New[engineState]()
		logs := graph.Reduced(b, "log", func(s *engineState) *[]string { return &s.Log }, graph.Append[string])
		answer := graph.Plain(b, "answer", func(s *engineState) *string { return &s.Answer })
		step := func(name string) graph.NodeFunc[engineState] {
			return func(ctx context.Context, st engineState) (graph.Update[engineState], error) {
				mu.Lock()
				fail := name == "b" && failB
				mu.Unlock()
				if fail {
					return graph.Update[engineState]{}, errors.New("b failed")
				}
				return graph.Updates(logs.Set([]string{name})), nil
			}
		}
		b.AddNode("a", step("a")).AddNode("b", step("b"))
		b.AddNode("ask", func(ctx context.Context, st engineState) (graph.Update[engineState], error) {
			var in string
			ok, err := graph.ResumeInput(ctx, &in)
			if err != nil {
				return graph.Update[engineState]{}, err
			}
			if !ok {
				return graph.Update[engineState]{}, graph.Interrupt("who?")
			}
			return graph.Updates(answer.Set(in), logs.Set([]string{"ask"})), nil
		})
		b.AddEdge(graph.START, "a").AddEdge(graph.START, "b").AddEdge("a", "ask").AddEdge("ask", graph.END)
		g, err := b.Compile(graph.WithCheckpointer(s))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if _, err := compile().Invoke(ctx, "run-1", graph.Update[engineState]{}); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("first run: %v, want node b to fail", err)
	}
	mu.Lock()
	failB = false
	mu.Unlock()
	res, err := compile().Continue(ctx, "run-1")
	if err != nil || !res.Interrupted() || res.Interrupts[0].Node != "ask" {
		t.Fatalf("continue: %+v, %v; want an interrupt at ask", res, err)
	}
	res, err = compile().Resume(ctx, "run-1", "Ada")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "ask"}; !slices.Equal(res.State.Log, want) || res.State.Answer != "Ada" {
		t.Fatalf("final state %+v, want log %v and answer Ada", res.State, want)
	}
	// Fork the paused checkpoint into another thread and answer differently.
	hist, err := compile().History(ctx, "run-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var paused string
	for _, h := range hist {
		if len(h.Interrupts) > 0 && len(h.Interrupts[0].Resume) == 0 {
			paused = h.Checkpoint.ID
			break
		}
	}
	if paused == "" {
		t.Fatalf("no paused checkpoint in the history of %d", len(hist))
	}
	if _, err := compile().Fork(ctx, "run-1", paused, "run-1-fork"); err != nil {
		t.Fatal(err)
	}
	res, err = compile().Resume(ctx, "run-1-fork", "Grace")
	if err != nil || res.State.Answer != "Grace" || !slices.Equal(res.State.Log, []string{"a", "b", "ask"}) {
		t.Fatalf("forked run: %+v, %v", res.State, err)
	}
	orig, err := compile().State(ctx, "run-1")
	if err != nil || orig.State.Answer != "Ada" {
		t.Fatalf("original thread after the fork: %+v, %v", orig.State, err)
	}
}
