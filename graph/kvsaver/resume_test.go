package kvsaver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/kvsaver"
)

type state struct {
	Log  []string `json:"log"`
	Blob string   `json:"blob"`
}

// chain compiles a graph a -> b -> c -> d -> e on saver; block, when not
// nil, is called at the start of node c on its first run.
func chain(t testing.TB, saver graph.Checkpointer, block func(ctx context.Context) error) *graph.Graph[state] {
	t.Helper()
	b := graph.New[state]()
	logs := graph.Reduced(b, "log", func(s *state) *[]string { return &s.Log }, graph.Append[string])
	nodes := []string{"a", "b", "c", "d", "e"}
	prev := graph.START
	for _, n := range nodes {
		b.AddNode(n, func(ctx context.Context, s state) (graph.Update[state], error) {
			info, _ := graph.Info(ctx)
			if n == "c" && block != nil && !info.Rerun {
				if err := block(ctx); err != nil {
					return graph.Update[state]{}, err
				}
			}
			return graph.Updates(logs.Set([]string{n})), nil
		})
		b.AddEdge(prev, n)
		prev = n
	}
	b.AddEdge(prev, graph.END)
	g, err := b.Compile(graph.WithCheckpointer(saver))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newSaver(t testing.TB, conn *bus.Conn) *kvsaver.Saver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := kvsaver.New(ctx, conn, kvsaver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestResumeAfterRestart: a run whose process context is cancelled mid-graph
// is finished by a fresh connection and graph after the NATS server
// restarts.
func TestResumeAfterRestart(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	g := chain(t, newSaver(t, conn), func(ctx context.Context) error {
		cancel() // the process dies while c runs
		<-ctx.Done()
		return ctx.Err()
	})
	if _, err := g.Invoke(ctx, "job-1", graph.Update[state]{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("invoke: %v, want context.Canceled", err)
	}
	_ = conn.Close()
	srv.Restart(t)

	conn2 := srv.Connect(t)
	g2 := chain(t, newSaver(t, conn2), nil)
	snap, err := g2.State(ctxT(t), "job-1")
	if err != nil || !slices.Equal(snap.State.Log, []string{"a", "b"}) || !slices.Equal(snap.Next, []string{"c"}) {
		t.Fatalf("state after restart: %+v next %v, %v", snap.State, snap.Next, err)
	}
	res, err := g2.Continue(ctxT(t), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(res.State.Log, want) || res.Step != 5 {
		t.Fatalf("resumed run %+v, want log %v after 5 steps", res, want)
	}
	hist, err := g2.History(ctxT(t), "job-1", 0)
	if err != nil || len(hist) != 6 || hist[0].Checkpoint.Step != 5 || hist[5].Checkpoint.Source != graph.SourceInput {
		t.Fatalf("history: %d checkpoints, %v", len(hist), err)
	}
}

// TestHelperProcess is not a test: TestResumeAfterKill runs the test binary
// again with GRAPH_HELPER set, to have a real process to SIGKILL.
func TestHelperProcess(t *testing.T) {
	url := os.Getenv("GRAPH_HELPER_NATS")
	if url == "" {
		return
	}
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.Config{URL: url})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	g := chain(t, newSaver(t, conn), func(ctx context.Context) error {
		fmt.Println("in-c") // the parent kills us now
		select {}
	})
	_, err = g.Invoke(ctx, "job-k", graph.Update[state]{})
	fmt.Println("error: returned", err)
	os.Exit(2)
}

// TestResumeAfterKill: a process running a graph is killed with SIGKILL in
// the middle of a node; this process finishes the thread from its KV
// checkpoint.
func TestResumeAfterKill(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := ctxT(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GRAPH_HELPER_NATS="+srv.URL)
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
		if strings.TrimSpace(sc.Text()) == "in-c" {
			ready = true
			break
		}
		t.Logf("helper: %s", sc.Text())
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper never reached node c: %v", sc.Err())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	g := chain(t, newSaver(t, conn), nil)
	res, err := g.Continue(ctx, "job-k")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(res.State.Log, want) {
		t.Fatalf("resumed log %v, want %v", res.State.Log, want)
	}
}

// TestTwoProcessesOneThread: two graphs on two connections run the same
// thread: the one that loses the race gets a *graph.ConflictError.
func TestTwoProcessesOneThread(t *testing.T) {
	srv := bustest.NewServer(t)
	conn1, conn2 := srv.Connect(t), srv.Connect(t)
	ctx := ctxT(t)
	entered, release := make(chan struct{}), make(chan struct{})
	g1 := chain(t, newSaver(t, conn1), func(ctx context.Context) error {
		close(entered)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	g2 := chain(t, newSaver(t, conn2), nil)
	errc := make(chan error, 1)
	go func() {
		_, err := g1.Invoke(ctx, "shared", graph.Update[state]{})
		errc <- err
	}()
	<-entered
	if _, err := g2.Invoke(ctx, "shared", graph.Update[state]{}); err != nil {
		t.Fatalf("second process: %v", err)
	}
	close(release)
	err := <-errc
	var ce *graph.ConflictError
	if !errors.As(err, &ce) || ce.Thread != "shared" {
		t.Fatalf("first process after the head moved: %v, want *graph.ConflictError", err)
	}
}

// TestTooLargeState: a state over the max payload fails with a typed error
// before anything is published, and the thread keeps its last checkpoint.
func TestTooLargeState(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := ctxT(t)
	b := graph.New[state]()
	blob := graph.Plain(b, "blob", func(s *state) *string { return &s.Blob })
	b.AddNode("grow", func(ctx context.Context, s state) (graph.Update[state], error) {
		return graph.Updates(blob.Set(strings.Repeat("x", 2<<20))), nil
	})
	b.AddEdge(graph.START, "grow")
	g, err := b.Compile(graph.WithCheckpointer(newSaver(t, conn)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Invoke(ctx, "big", graph.Update[state]{})
	var te *graph.TooLargeError
	if !errors.As(err, &te) || te.Size < 2<<20 || te.Limit >= 2<<20 || !errors.Is(err, graph.ErrTooLarge) {
		t.Fatalf("invoke: %v, want *graph.TooLargeError", err)
	}
	snap, err := g.State(ctx, "big")
	if err != nil || snap.Checkpoint.Source != graph.SourceInput {
		t.Fatalf("head: %+v, %v; want the input checkpoint", snap.Checkpoint, err)
	}
}

// TestPrunesStorage: the stream really holds at most Retention+PruneEvery-1
// messages of a thread.
func TestPrunesStorage(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := ctxT(t)
	s, err := kvsaver.New(ctx, conn, kvsaver.Config{Retention: 4, PruneEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	var v uint64
	for seq := uint64(1); seq <= 40; seq++ {
		if v, err = s.Put(ctx, graph.Checkpoint{Thread: "p", Seq: seq, ID: graph.FormatID(seq), State: []byte{0x80}}, v); err != nil {
			t.Fatal(err)
		}
	}
	st, err := conn.JetStream().Stream(ctx, "KV_"+conn.Names().OrchBucket())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+conn.Names().OrchBucket()+".cp.p.*"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(info.State.Subjects); n < 4 || n > 4+2 {
		t.Fatalf("stream holds %d checkpoints of the thread, want 4..6", n)
	}
	if _, err := kvsaver.New(ctx, conn, kvsaver.Config{Retention: 1}); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("retention 1: %v", err)
	}
	if _, err := kvsaver.New(ctx, conn, kvsaver.Config{Prefix: "a.b"}); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Fatalf("prefix a.b: %v", err)
	}
	own, err := kvsaver.New(ctx, conn, kvsaver.Config{Bucket: "graph_own"})
	if err != nil {
		t.Fatalf("own bucket: %v", err)
	}
	if _, err := own.Put(ctx, graph.Checkpoint{Thread: "p", Seq: 1, ID: graph.FormatID(1)}, 0); err != nil {
		t.Fatalf("put in own bucket: %v", err)
	}
}
