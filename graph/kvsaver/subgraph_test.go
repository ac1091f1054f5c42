package kvsaver_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
)

// nested compiles parent: start -> sub -> end, where sub is the chain
// a..e as a subgraph sharing the state; block runs at the child's c. The
// child's final log is appended to the parent's (AddSubgraph applies it
// through the parent's reducer, as LangGraph does), so "start" appears
// twice in the parent's final log.
func nested(t testing.TB, saver graph.Checkpointer, block func(ctx context.Context) error) *graph.Graph[state] {
	t.Helper()
	// The child's own checkpointer is not used: as a subgraph it runs in the parent's.
	return nestedWith(t, saver, chain(t, graph.NewMemorySaver(0), block))
}

func nestedWith(t testing.TB, saver graph.Checkpointer, child *graph.Graph[state]) *graph.Graph[state] {
	t.Helper()
	b := graph.New[state]()
	logs := graph.Reduced(b, "log", func(s *state) *[]string { return &s.Log }, graph.Append[string])
	b.AddNode("start", func(ctx context.Context, s state) (graph.Update[state], error) {
		return graph.Updates(logs.Set([]string{"start"})), nil
	})
	graph.AddSubgraph(b, "sub", child)
	b.AddNode("end", func(ctx context.Context, s state) (graph.Update[state], error) {
		return graph.Updates(logs.Set([]string{"end"})), nil
	})
	b.AddEdge(graph.START, "start").AddEdge("start", "sub").AddEdge("sub", "end").AddEdge("end", graph.END)
	g, err := b.Compile(graph.WithCheckpointer(saver))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHelperSubgraph is not a test: TestSubgraphKilledInChild runs the test
// binary again with GRAPH_SUB_NATS set, to have a real process to SIGKILL
// while it runs node c of the subgraph.
func TestHelperSubgraph(t *testing.T) {
	url := os.Getenv("GRAPH_SUB_NATS")
	if url == "" {
		return
	}
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.Config{URL: url})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	g := nested(t, newSaver(t, conn), func(ctx context.Context) error {
		fmt.Println("in-child-c")
		select {}
	})
	_, err = g.Invoke(ctx, "job-sub", graph.Update[state]{})
	fmt.Println("error: returned", err)
	os.Exit(2)
}

// TestSubgraphKilledInChild: the process running a parent graph is killed
// with SIGKILL inside a node of its subgraph; this process finishes the
// parent thread from the KV checkpoints: the child continues its own
// thread (a and b are not run again) and the parent goes on after it.
func TestSubgraphKilledInChild(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := ctxT(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperSubgraph$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GRAPH_SUB_NATS="+srv.URL)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "in-child-c" {
			ready = true
			break
		}
		t.Logf("helper: %s", sc.Text())
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper never reached the child's node c: %v", sc.Err())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	saver := newSaver(t, conn)
	g := nested(t, saver, func(ctx context.Context) error { return nil })
	snap, err := g.State(ctx, "job-sub")
	if err != nil || len(snap.Tasks) != 1 || snap.Tasks[0].Node != "sub" {
		t.Fatalf("parent after the kill: %+v, %v", snap.Tasks, err)
	}
	child := chain(t, graph.NewMemorySaver(0), nil)
	cs, err := child.State(ctx, snap.Tasks[0].Thread, graph.UsingCheckpointer(saver))
	if err != nil || !slices.Equal(cs.Next, []string{"c"}) || !slices.Equal(cs.State.Log, []string{"start", "a", "b"}) {
		t.Fatalf("child thread %q after the kill: %+v next %v, %v", snap.Tasks[0].Thread, cs.State, cs.Next, err)
	}
	res, err := g.Continue(ctx, "job-sub")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start", "start", "a", "b", "c", "d", "e", "end"}; !slices.Equal(res.State.Log, want) {
		t.Fatalf("finished log %v, want %v", res.State.Log, want)
	}
}

// asker is a subgraph a -> ask -> e whose ask node asks "who?".
func asker(t testing.TB) *graph.Graph[state] {
	t.Helper()
	b := graph.New[state]()
	logs := graph.Reduced(b, "log", func(s *state) *[]string { return &s.Log }, graph.Append[string])
	b.AddNode("a", func(ctx context.Context, s state) (graph.Update[state], error) {
		return graph.Updates(logs.Set([]string{"a"})), nil
	})
	b.AddNode("ask", func(ctx context.Context, s state) (graph.Update[state], error) {
		who, err := graph.Ask[string](ctx, "who?")
		if err != nil {
			return graph.Update[state]{}, err
		}
		return graph.Updates(logs.Set([]string{"ask " + who})), nil
	})
	b.AddNode("e", func(ctx context.Context, s state) (graph.Update[state], error) {
		return graph.Updates(logs.Set([]string{"e"})), nil
	})
	b.AddEdge(graph.START, "a").AddEdge("a", "ask").AddEdge("ask", "e")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSubgraphInterruptKV: with the KV checkpointer, a question asked
// inside the subgraph surfaces to the parent and is answered through a
// fresh connection and graph; the child continues at its ask node.
func TestSubgraphInterruptKV(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := ctxT(t)
	g := nestedWith(t, newSaver(t, conn), asker(t))
	res, err := g.Invoke(ctx, "ask-1", graph.Update[state]{})
	if err != nil || len(res.Interrupts) != 1 || res.Interrupts[0].Node != "sub" || !strings.HasPrefix(res.Interrupts[0].Namespace, "sub:") {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	conn2 := srv.Connect(t)
	g2 := nestedWith(t, newSaver(t, conn2), asker(t))
	res, err = g2.ResumeEach(ctx, "ask-1", map[string]any{res.Interrupts[0].ID: "Ada"})
	if want := []string{"start", "start", "a", "ask Ada", "e", "end"}; err != nil || !slices.Equal(res.State.Log, want) {
		t.Fatalf("resume: %+v, %v; want log %v", res, err, want)
	}
}
