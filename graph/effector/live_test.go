package effector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/effector"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

type liveState struct {
	Done []string `json:"done"`
	Text string   `json:"text"`
}

// liveRig is a node hosting one graph kind, a client and an effector.
type liveRig struct {
	conn   *bus.Conn
	client *actor.Client
	ref    records.Ref
	ctx    context.Context
}

func newLiveRig(t *testing.T, g *graph.Graph[liveState], opts ...effector.Option) *liveRig {
	t.Helper()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	kind, err := effector.Kind(actor.Kind[liveState]{
		Name:  "live",
		Retry: actor.RetryPolicy{Attempts: 1},
	}, g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, conn, actor.Options{}, kind)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	ref := records.Ref{Kind: "live", ID: "l1"}
	actortest.Create(t, client, ref, liveState{})
	return &liveRig{conn: conn, client: client, ref: ref, ctx: ctx}
}

func (r *liveRig) send(t *testing.T, rec records.Record) records.Record {
	t.Helper()
	sent, err := r.client.Send(r.ctx, r.ref, rec)
	if err != nil {
		t.Fatal(err)
	}
	return sent
}

// outbox reads every record stored on the effector's outbox, straight from
// the stream (Subscribe stops at the end record; this does not).
func (r *liveRig) outbox(t *testing.T) []records.Record {
	t.Helper()
	names := r.conn.Names()
	stream, filter, _ := names.Stored(names.Outbox(r.ref))
	c, err := r.conn.JetStream().OrderedConsumer(r.ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var out []records.Record
	for {
		info, err := c.Info(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 {
			return out
		}
		batch, err := c.Fetch(int(min(info.NumPending, 100)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			rec, err := records.FromMsg(m.Subject(), m.Headers(), m.Data())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rec)
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// follow subscribes to the outbox from its start and hands the records
// over on a channel.
func (r *liveRig) follow(t *testing.T) <-chan records.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	recs, err := r.client.Subscribe(ctx, r.ref, actor.FromStart())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ch := make(chan records.Record, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for rec, err := range recs {
			if err != nil {
				return
			}
			select {
			case ch <- rec:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

func next(t *testing.T, ch <-chan records.Record) records.Record {
	t.Helper()
	select {
	case rec, ok := <-ch:
		if !ok {
			t.Fatal("outbox subscription ended")
		}
		return rec
	case <-time.After(30 * time.Second):
		t.Fatal("no record on the outbox in 30s")
	}
	return records.Record{}
}

func eventOf(t *testing.T, rec records.Record) effector.Event {
	t.Helper()
	var ev effector.Event
	if err := rec.Decode(&ev); err != nil {
		t.Fatalf("record %s of type %s: %v", rec.ID, rec.Type, err)
	}
	return ev
}

// TestLiveRecordsWhileRunning: what a slow node writes (progress, custom
// values, a token) reaches the outbox while the node still runs, before
// the state changes; the records it emits for the commit come after, and
// live records carry ids derived from the input record's.
func TestLiveRecordsWhileRunning(t *testing.T) {
	release := make(chan struct{})
	b := graph.New[liveState]()
	done := graph.Reduced(b, "done", func(s *liveState) *[]string { return &s.Done }, graph.Append[string])
	b.AddNode("slow", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		graph.WriteCustom(ctx, map[string]any{"progress": 50})
		graph.WriteMessage(ctx, "tok")
		if err := effector.Emit(ctx, "result", "done"); err != nil {
			return graph.Update[liveState]{}, err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return graph.Update[liveState]{}, ctx.Err()
		}
		return graph.Updates(done.Set([]string{"slow"})), nil
	})
	b.AddEdge(graph.START, "slow")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	rig := newLiveRig(t, g, effector.Live(effector.DefaultLive|graph.StreamTasks))
	outs := rig.follow(t)
	in, _ := records.New("go", nil)
	in = rig.send(t, in)

	want := []struct{ typ, detail string }{
		{effector.TypeTask, "task"},
		{effector.TypeCustom, ""},
		{effector.TypeMessage, "tok"},
	}
	for i, w := range want {
		rec := next(t, outs)
		ev := eventOf(t, rec)
		if rec.Type != w.typ || ev.Node != "slow" || ev.Task == "" {
			t.Fatalf("live record %d: %s %+v, want %s of node slow", i, rec.Type, ev, w.typ)
		}
		if w.typ == effector.TypeTask && ev.Event != w.detail || w.typ == effector.TypeMessage && ev.Data != w.detail {
			t.Fatalf("live record %d: %+v, want %q", i, ev, w.detail)
		}
		if !strings.HasPrefix(rec.ID, in.ID+":s") || rec.Cause != in.ID {
			t.Fatalf("live record id %s (cause %s): want %s:s<n>.<tag>", rec.ID, rec.Cause, in.ID)
		}
	}
	// All three came while the node still runs: nothing applied yet.
	doc, err := rig.client.State(rig.ctx, rig.ref)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Seq != 0 {
		t.Fatalf("state applied (seq %d) before the node was released", doc.Seq)
	}
	close(release)
	if rec := next(t, outs); rec.Type != effector.TypeTask || eventOf(t, rec).Event != "task_result" {
		t.Fatalf("after release: %s %+v, want the task_result", rec.Type, eventOf(t, rec))
	}
	if rec := next(t, outs); rec.Type != "result" {
		t.Fatalf("after the live records: %s, want the held result", rec.Type)
	}
	actortest.Eventually(t, 30*time.Second, "state applied", func() bool {
		d, err := rig.client.State(rig.ctx, rig.ref)
		return err == nil && d.Seq > 0
	})
}

// chainGraph: a -> b -> END. a writes a custom value, hands its context to
// the test and waits for release (ignoring its context: the run stops at
// the boundary after it); b counts its runs.
func chainGraph(t *testing.T, started chan<- context.Context, release <-chan struct{}, bRuns *atomic.Int32) *graph.Graph[liveState] {
	t.Helper()
	b := graph.New[liveState]()
	done := graph.Reduced(b, "done", func(s *liveState) *[]string { return &s.Done }, graph.Append[string])
	b.AddNode("a", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		if rec, _ := effector.Record(ctx); rec.Type == actor.TypeCancel {
			return graph.Update[liveState]{}, nil
		}
		graph.WriteCustom(ctx, "a started")
		started <- ctx
		<-release
		return graph.Updates(done.Set([]string{"a"})), nil
	})
	b.AddNode("b", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		if rec, _ := effector.Record(ctx); rec.Type == actor.TypeCancel {
			return graph.Update[liveState]{}, nil
		}
		bRuns.Add(1)
		graph.WriteCustom(ctx, "b ran")
		return graph.Updates(done.Set([]string{"b"})), nil
	})
	b.AddEdge(graph.START, "a").AddEdge("a", "b")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTerminateInterruptsRun: terminating the effector while node a runs
// cancels the run's context (cause ErrTerminated); a finishes, the run stops
// at the boundary (b never runs), nothing is committed, terminate returns
// once the effector stopped, and nothing follows the end record.
func TestTerminateInterruptsRun(t *testing.T) {
	started := make(chan context.Context, 1)
	release := make(chan struct{})
	var bRuns atomic.Int32
	rig := newLiveRig(t, chainGraph(t, started, release, &bRuns), effector.Live(effector.DefaultLive|graph.StreamTasks))
	in, _ := records.New("go", nil)
	rig.send(t, in)
	var nodeCtx context.Context
	select {
	case nodeCtx = <-started:
	case <-rig.ctx.Done():
		t.Fatal("node a never started")
	}
	terminated := make(chan error, 1)
	go func() {
		_, err := rig.client.Terminate(rig.ctx, rig.ref)
		terminated <- err
	}()
	select {
	case <-nodeCtx.Done():
	case <-rig.ctx.Done():
		t.Fatal("terminate did not cancel the running node's context")
	}
	if cause := context.Cause(nodeCtx); !errors.Is(cause, actor.ErrTerminated) || !errors.Is(cause, actor.ErrCancelled) {
		t.Fatalf("cause %v: want ErrTerminated and ErrCancelled", cause)
	}
	select {
	case err := <-terminated:
		t.Fatalf("terminate returned (%v) while the run was still in progress", err)
	default:
	}
	close(release)
	if err := <-terminated; err != nil {
		t.Fatal(err)
	}
	if n := bRuns.Load(); n != 0 {
		t.Fatalf("node b ran %d times after terminate", n)
	}
	recs := rig.outbox(t)
	var types []string
	for _, r := range recs {
		types = append(types, r.Type)
	}
	if len(recs) == 0 || recs[len(recs)-1].Type != actor.TypeEnd {
		t.Fatalf("outbox %v: want the end record last", types)
	}
	for _, r := range recs {
		if r.Type == effector.TypeCustom && eventOf(t, r).Node == "b" {
			t.Fatalf("outbox %v: b's record published", types)
		}
	}
	// The record in hand went to dead letters as cancelled.
	dls, err := rig.client.DeadLetters(rig.ctx, rig.ref, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	for dl, err := range dls {
		if err != nil {
			t.Fatal(err)
		}
		if dl.Reason != "cancelled" || !strings.Contains(dl.Error, "terminated") {
			t.Fatalf("dead letter %s: %s", dl.Reason, dl.Error)
		}
		break
	}
}

// TestCancelRecordInterruptsRun: a cancel record of the run's process (an
// orchestration cancelled) interrupts the run at the next node boundary;
// the record goes to dead letters as cancelled and the effector goes on.
func TestCancelRecordInterruptsRun(t *testing.T) {
	started := make(chan context.Context, 1)
	release := make(chan struct{})
	var bRuns atomic.Int32
	rig := newLiveRig(t, chainGraph(t, started, release, &bRuns))
	in, _ := records.New("go", nil)
	in.Process = "p1"
	rig.send(t, in)
	nodeCtx := <-started
	cancel, _ := records.New(actor.TypeCancel, nil)
	cancel.Process, cancel.Priority = "p1", records.PriorityHigh
	rig.send(t, cancel)
	<-nodeCtx.Done()
	if !errors.Is(context.Cause(nodeCtx), actor.ErrCancelled) {
		t.Fatalf("cause %v", context.Cause(nodeCtx))
	}
	close(release)
	actortest.Eventually(t, 30*time.Second, "both records handled", func() bool {
		d, err := rig.client.State(rig.ctx, rig.ref)
		return err == nil && d.Seq >= 2
	})
	if n := bRuns.Load(); n != 0 {
		t.Fatalf("node b ran %d times after the cancel", n)
	}
	d, err := rig.client.State(rig.ctx, rig.ref)
	if err != nil {
		t.Fatal(err)
	}
	var s liveState
	if err := d.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if len(s.Done) != 0 {
		t.Fatalf("state %+v: the interrupted run was committed", s)
	}
	for _, r := range rig.outbox(t) {
		if r.Type == effector.TypeCustom && eventOf(t, r).Node == "b" {
			t.Fatal("b's record published")
		}
	}
}

// TestTerminateStopsLLMStream: a node streaming a model's answer publishes
// each token live; terminate closes the HTTP stream at once (the fake
// provider sees the disconnect), the next node never runs, and nothing
// follows the end record.
func TestTerminateStopsLLMStream(t *testing.T) {
	llmSrv := llmtest.NewServer(t)
	p, err := llm.New(llm.Config{BaseURL: llmSrv.URL, Model: "fake-model", APIKey: "k",
		Retry: llm.Retry{Attempts: 1, Backoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	llmSrv.Enqueue(llmtest.Reply{Chunks: []string{"Otters ", "hold "}, Hang: true})
	var afterRuns atomic.Int32
	b := graph.New[liveState]()
	text := graph.Plain(b, "text", func(s *liveState) *string { return &s.Text })
	b.AddNode("chat", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		out, err := graph.StreamText(ctx, core.StreamText(ctx, p, core.Prompt("", "otters?")))
		if err != nil {
			return graph.Update[liveState]{}, err
		}
		return graph.Updates(text.Set(out)), nil
	})
	b.AddNode("after", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		afterRuns.Add(1)
		return graph.Update[liveState]{}, nil
	})
	b.AddEdge(graph.START, "chat").AddEdge("chat", "after")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	rig := newLiveRig(t, g)
	outs := rig.follow(t)
	in, _ := records.New("ask", nil)
	rig.send(t, in)
	var tokens []string
	for len(tokens) < 2 {
		rec := next(t, outs)
		if rec.Type != effector.TypeMessage {
			t.Fatalf("record %s before the tokens", rec.Type)
		}
		tokens = append(tokens, eventOf(t, rec).Data.(string))
	}
	if strings.Join(tokens, "") != "Otters hold " {
		t.Fatalf("tokens %q", tokens)
	}
	if _, err := rig.client.Terminate(rig.ctx, rig.ref); err != nil {
		t.Fatal(err)
	}
	if err := llmSrv.WaitDisconnect(rig.ctx); err != nil {
		t.Fatalf("the model's stream was not closed: %v", err)
	}
	if n := afterRuns.Load(); n != 0 {
		t.Fatalf("the next node ran %d times", n)
	}
	recs := rig.outbox(t)
	if last := recs[len(recs)-1]; last.Type != actor.TypeEnd {
		t.Fatalf("last outbox record %s, want end", last.Type)
	}
}

// TestLivePublishFailureStopsRun: a value that cannot be published live
// (it does not encode) stops the run: the record goes to dead letters at
// once, the next node never runs, nothing is committed.
func TestLivePublishFailureStopsRun(t *testing.T) {
	var afterRuns atomic.Int32
	b := graph.New[liveState]()
	b.AddNode("bad", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		graph.WriteCustom(ctx, make(chan int))
		return graph.Update[liveState]{}, nil
	})
	b.AddNode("after", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
		afterRuns.Add(1)
		return graph.Update[liveState]{}, nil
	})
	b.AddEdge(graph.START, "bad").AddEdge("bad", "after")
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	rig := newLiveRig(t, g)
	in, _ := records.New("go", nil)
	rig.send(t, in)
	dls, err := rig.client.DeadLetters(rig.ctx, rig.ref, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	for dl, err := range dls {
		if err != nil {
			t.Fatal(err)
		}
		if dl.Reason != "rejected" || !strings.Contains(dl.Error, "publish live graph.custom record of node \"bad\"") {
			t.Fatalf("dead letter %s: %s", dl.Reason, dl.Error)
		}
		break
	}
	if n := afterRuns.Load(); n != 0 {
		t.Fatalf("the next node ran %d times", n)
	}
}

// TestOrchestrationCancelInterruptsRun: a supervisor's orchestration sends
// a task to a graph effector; cancelling the orchestration (its cancel
// record to the worker) interrupts the graph's run at the next node
// boundary: b never runs, the task's record goes to dead letters as
// cancelled, nothing of it is committed.
func TestOrchestrationCancelInterruptsRun(t *testing.T) {
	started := make(chan context.Context, 1)
	release := make(chan struct{})
	var bRuns atomic.Int32
	rig := newLiveRig(t, chainGraph(t, started, release, &bRuns))
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)

	ob := graph.New[orchState]()
	done := graph.Plain(ob, "done", func(s *orchState) *bool { return &s.Done })
	ob.AddNode("work", func(ctx context.Context, s orchState) (graph.Update[orchState], error) {
		if _, err := supervisor.Call(ctx, rig.ref, "go", nil); err != nil {
			return graph.Update[orchState]{}, err
		}
		return graph.Updates(done.Set(true)), nil
	})
	ob.AddEdge(graph.START, "work")
	def, err := supervisor.Define(supervisor.Spec[orchState]{Name: "livework", Graph: ob})
	if err != nil {
		t.Fatal(err)
	}
	sup, err := supervisor.New(rig.conn, supervisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Register(def); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(rig.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() {
		if err := sup.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	actortest.Eventually(t, 30*time.Second, "supervisor ready", sup.Ready)
	sc, err := supervisor.NewClient(rig.conn)
	if err != nil {
		t.Fatal(err)
	}
	id, err := sc.Start(rig.ctx, "livework", nil)
	if err != nil {
		t.Fatal(err)
	}
	var nodeCtx context.Context
	select {
	case nodeCtx = <-started:
	case <-rig.ctx.Done():
		t.Fatal("the worker's graph never started")
	}
	if err := sc.Cancel(rig.ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-nodeCtx.Done():
	case <-rig.ctx.Done():
		t.Fatal("cancelling the orchestration did not cancel the worker's run")
	}
	if !errors.Is(context.Cause(nodeCtx), actor.ErrCancelled) {
		t.Fatalf("cause %v", context.Cause(nodeCtx))
	}
	unblock()
	dls, err := rig.client.DeadLetters(rig.ctx, rig.ref, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	for dl, err := range dls {
		if err != nil {
			t.Fatal(err)
		}
		if dl.Reason != "cancelled" || dl.Record.Process != id {
			t.Fatalf("dead letter %s of process %s: %s", dl.Reason, dl.Record.Process, dl.Error)
		}
		break
	}
	if n := bRuns.Load(); n != 0 {
		t.Fatalf("node b ran %d times after the cancel", n)
	}
	d, err := rig.client.State(rig.ctx, rig.ref)
	if err != nil {
		t.Fatal(err)
	}
	var s liveState
	if err := d.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if len(s.Done) != 0 {
		t.Fatalf("state %+v: the interrupted run was committed", s)
	}
}

type orchState struct {
	Done bool `json:"done"`
}
