package task_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/records"
)

// The four outcomes of a run on an effector on a node, over NATS.
func TestRemote(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	fake := llmtest.NewServer(t)
	nodeConn := srv.Connect(t)
	// "scoped" reaches its LLM through the services of core.Wrap; "denied"
	// is not permitted to use it.
	svc := &core.Services{LLM: llmAgent(t, fake).LLM}
	scoped, err := core.Wrap(svc, core.Permissions{Services: []core.Service{core.ServiceLLM}}, task.Kind("scoped", task.LLMAgent{System: "sys"}))
	if err != nil {
		t.Fatal(err)
	}
	denied, err := core.Wrap(svc, core.Permissions{}, task.Kind("denied", task.LLMAgent{System: "sys"}))
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, nodeConn, actor.Options{}, task.Kind("writer", llmAgent(t, fake)), scoped, denied)

	client, err := actor.NewClient(t.Context(), srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	target := records.Ref{Kind: "writer", ID: "w1"}
	if _, err := client.Create(t.Context(), target, nil); err != nil {
		t.Fatal(err)
	}
	remote := task.Remote{Client: client, Target: target, StopWait: 10 * time.Second}

	t.Run("completed", func(t *testing.T) {
		fake.Enqueue(llmtest.Reply{Chunks: []string{"remote ", "text"}})
		res, err := task.Collect(t.Context(), remote, "write", task.With(task.Start{Session: "sess-1", Workspace: "ws"}))
		if err != nil || res.Text != "remote text" || res.Partial || res.Session != "sess-1" {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
	t.Run("failed", func(t *testing.T) {
		fake.Enqueue(llmtest.Reply{Chunks: []string{"some ", "text"}, FailStream: true})
		res, err := task.Collect(t.Context(), remote, "write")
		if !errors.Is(err, core.ErrProvider) || !res.Partial || res.Text != "some text" {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		fake.Enqueue(llmtest.Reply{Chunks: []string{"slow"}, Hang: true})
		res, err := task.Collect(t.Context(), remote, "write", task.Timeout(500*time.Millisecond))
		if !errors.Is(err, core.ErrTimeout) || !res.Partial || res.Text != "slow" {
			t.Fatalf("res %+v err %v", res, err)
		}
		// The cancel record cancelled the logic on the node, which closed the HTTP stream.
		waitDisconnect(t, fake)
	})
	t.Run("cancelled", func(t *testing.T) {
		fake.Enqueue(llmtest.Reply{Chunks: []string{"first"}, Hang: true})
		ctx, cancel := context.WithCancel(t.Context())
		n := len(fake.Requests())
		go func() {
			for len(fake.Requests()) == n {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		res, err := task.Collect(ctx, remote, "write")
		if !errors.Is(err, core.ErrCancelled) || !res.Partial {
			t.Fatalf("res %+v err %v", res, err)
		}
		waitDisconnect(t, fake)
	})
	actortest.Eventually(t, 20*time.Second, "run counts in the state", func() bool {
		doc, err := client.State(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		var s task.Stats
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s == task.Stats{Completed: 1, Failed: 1, Cancelled: 2}
	})
	for _, r := range []records.Ref{{Kind: "scoped", ID: "s1"}, {Kind: "denied", ID: "d1"}} {
		if _, err := client.Create(t.Context(), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	fake.Enqueue(llmtest.Reply{Text: "through the scope"})
	res, err := task.Collect(t.Context(), task.Remote{Client: client, Target: records.Ref{Kind: "scoped", ID: "s1"}}, "write")
	if err != nil || res.Text != "through the scope" {
		t.Fatalf("scoped: %+v %v", res, err)
	}
	_, err = task.Collect(t.Context(), task.Remote{Client: client, Target: records.Ref{Kind: "denied", ID: "d1"}}, "write")
	if !errors.Is(err, core.ErrPermission) {
		t.Fatalf("denied: %v", err)
	}
	reqs := fake.Requests()
	if len(reqs) != 5 || reqs[0].LastUser() != "write" {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestRemoteInvalid(t *testing.T) {
	t.Parallel()
	for _, r := range []task.Remote{{}, {Client: &actor.Client{}, Target: records.Ref{Kind: "a.b", ID: "x"}}} {
		if _, err := task.Collect(t.Context(), r, "x"); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%+v: err %v", r, err)
		}
	}
}

// Cancels race completions many times: each run has exactly one outcome on
// the caller's side, consistent with its result, and exactly one on the node.
func TestRemoteOneOutcome(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	fake := llmtest.NewServer(t)
	fake.Respond(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Chunks: []string{"x", "y", "z"}} })
	actortest.StartNode(t, srv.Connect(t), actor.Options{}, task.Kind("racer", llmAgent(t, fake)))
	client, err := actor.NewClient(t.Context(), srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	target := records.Ref{Kind: "racer", ID: "r1"}
	if _, err := client.Create(t.Context(), target, nil); err != nil {
		t.Fatal(err)
	}
	const n = 30
	var completed, cancelled int
	for i := range n {
		ctx, cancel := context.WithCancel(t.Context())
		// Cancel once the task record is sent, after 0-9 ms.
		var timer *time.Timer
		agent := agentFunc(func(ctx context.Context, in string, st task.Start, sinks task.Sinks) (task.Handle, error) {
			h, err := task.Remote{Client: client, Target: target}.Start(ctx, in, st, sinks)
			timer = time.AfterFunc(time.Duration(i%10)*time.Millisecond, cancel)
			return h, err
		})
		res, err := task.Collect(ctx, agent, "go")
		timer.Stop()
		cancel()
		switch {
		case err == nil && res.Text == "xyz" && !res.Partial:
			completed++
		case errors.Is(err, core.ErrCancelled) && res.Partial:
			cancelled++
		default:
			t.Fatalf("iteration %d: %+v %v", i, res, err)
		}
	}
	t.Logf("completed %d, cancelled %d", completed, cancelled)
	actortest.Eventually(t, 20*time.Second, "every run counted once on the node", func() bool {
		doc, err := client.State(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		var s task.Stats
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if sum := s.Completed + s.Cancelled + s.Failed; sum > n || s.Failed != 0 {
			t.Fatalf("node counted %+v for %d runs", s, n)
		}
		return s.Completed+s.Cancelled == n
	})
}

type agentFunc func(ctx context.Context, input string, start task.Start, sinks task.Sinks) (task.Handle, error)

func (f agentFunc) Start(ctx context.Context, input string, start task.Start, sinks task.Sinks) (task.Handle, error) {
	return f(ctx, input, start, sinks)
}
