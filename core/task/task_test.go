package task_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func llmAgent(t testing.TB, srv *llmtest.Server) task.LLMAgent {
	t.Helper()
	p, err := llm.New(llm.Config{BaseURL: srv.URL, Model: "m", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return task.LLMAgent{LLM: p, System: "sys"}
}

func waitDisconnect(t *testing.T, srv *llmtest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := srv.WaitDisconnect(ctx); err != nil {
		t.Fatal(err)
	}
}

// The four outcomes with a real LLM stream against the fake server.
func TestCollectLLM(t *testing.T) {
	t.Parallel()
	t.Run("completed", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Chunks: []string{"all ", "of ", "it"}})
		res, err := task.Collect(t.Context(), llmAgent(t, srv), "go", task.With(task.Start{Session: "s1", Workspace: "w"}))
		if err != nil || res.Text != "all of it" || res.Partial || res.Session != "s1" || res.Elapsed <= 0 {
			t.Fatalf("res %+v err %v", res, err)
		}
		if r := srv.Requests()[0]; r.System() != "sys" || r.LastUser() != "go" {
			t.Fatalf("request %+v", r)
		}
	})
	t.Run("failed", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Chunks: []string{"half ", "way"}, FailStream: true})
		res, err := task.Collect(t.Context(), llmAgent(t, srv), "go")
		if !errors.Is(err, core.ErrProvider) || !res.Partial || res.Text != "half way" || res.Session == "" {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Chunks: []string{"slow "}, Hang: true})
		res, err := task.Collect(t.Context(), llmAgent(t, srv), "go", task.Timeout(100*time.Millisecond))
		if !errors.Is(err, core.ErrTimeout) || !res.Partial || res.Text != "slow " {
			t.Fatalf("res %+v err %v", res, err)
		}
		waitDisconnect(t, srv)
	})
	t.Run("cancelled", func(t *testing.T) {
		srv := llmtest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Chunks: []string{"first "}, Hang: true})
		ctx, cancel := context.WithCancelCause(t.Context())
		stop := errors.New("user pressed stop")
		go func() {
			// Cancel once the first request has arrived.
			for len(srv.Requests()) == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel(stop)
		}()
		res, err := task.Collect(ctx, llmAgent(t, srv), "go")
		if !errors.Is(err, core.ErrCancelled) || !errors.Is(err, stop) || !res.Partial {
			t.Fatalf("res %+v err %v", res, err)
		}
		waitDisconnect(t, srv)
	})
}

// Races every outcome against the others many times: exactly one outcome,
// consistent with the result, and the agent's work has stopped when Collect
// returns.
func TestCollectOneOutcome(t *testing.T) {
	t.Parallel()
	const n = 300
	counts := map[core.Code]int{}
	for i := range n {
		var running atomic.Bool
		fail := errors.New("agent failed")
		mode := i % 4
		agent := task.Func(func(ctx context.Context, input string, _ task.Start, out task.Output) error {
			running.Store(true)
			defer running.Store(false)
			for j := range 5 {
				out.Text(fmt.Sprint(j))
				out.Event(task.Event{Type: "step"})
				if rand.IntN(3) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				}
			}
			switch mode {
			case 1:
				return fail
			case 2, 3:
				<-ctx.Done() // wait for the timeout or the cancel
				out.Text("late")
				return ctx.Err()
			}
			return nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		opts := []task.Option{}
		if mode == 2 {
			opts = append(opts, task.Timeout(time.Duration(1+rand.IntN(300))*time.Microsecond))
		}
		if mode == 3 {
			go func() {
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				cancel()
			}()
		}
		res, err := task.Collect(ctx, agent, "x", opts...)
		cancel()
		if running.Load() {
			t.Fatalf("iteration %d: the agent still runs after Collect returned", i)
		}
		code := core.CodeOf(err)
		counts[code]++
		switch {
		case err == nil:
			if mode != 0 || res.Partial || res.Text != "01234" || len(res.Events) != 5 {
				t.Fatalf("iteration %d: completed with %+v", i, res)
			}
		case mode == 1:
			if !errors.Is(err, fail) || code != core.CodeFailed || !res.Partial || res.Text != "01234" {
				t.Fatalf("iteration %d: failed with %+v %v", i, res, err)
			}
		case mode == 2 && code == core.CodeTimeout, mode == 3 && code == core.CodeCancelled:
			// On timeout the agent's context ends only after the output is
			// frozen; on the caller's cancel both see it at once, so output
			// written on the way out may still count.
			text := res.Text
			if mode == 3 {
				text = strings.TrimSuffix(text, "late")
			}
			if !res.Partial || strings.Contains(text, "late") || !strings.HasPrefix("01234", text) || (len(res.Events) != len(text) && len(res.Events) != len(text)-1) {
				t.Fatalf("iteration %d: %s with %+v", i, code, res)
			}
		default:
			t.Fatalf("iteration %d (mode %d): unexpected outcome %+v %v", i, mode, res, err)
		}
	}
	if counts[""] == 0 || counts[core.CodeFailed] == 0 || counts[core.CodeTimeout] == 0 || counts[core.CodeCancelled] == 0 {
		t.Fatalf("not every outcome was seen: %v", counts)
	}
}

func TestCollectInvalid(t *testing.T) {
	t.Parallel()
	ok := task.Func(func(context.Context, string, task.Start, task.Output) error { return nil })
	for _, tc := range []struct {
		name string
		a    task.Agent
		opts []task.Option
	}{
		{"nil agent", nil, nil},
		{"bad timeout", ok, []task.Option{task.Timeout(0)}},
		{"bad grace", ok, []task.Option{task.StopGrace(-1)}},
		{"bad session", ok, []task.Option{task.With(task.Start{Session: "a.b"})}},
	} {
		if _, err := task.Collect(t.Context(), tc.a, "x", tc.opts...); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
	panicky := task.Func(func(context.Context, string, task.Start, task.Output) error { panic("boom") })
	res, err := task.Collect(t.Context(), panicky, "x")
	if !errors.Is(err, core.ErrPanic) || !res.Partial {
		t.Fatalf("panic: %+v %v", res, err)
	}
}
