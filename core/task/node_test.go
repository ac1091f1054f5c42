package task_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/graph"
)

type doc struct {
	Topic   string   `json:"topic"`
	Outline string   `json:"outline"`
	Draft   string   `json:"draft"`
	Steps   []string `json:"steps"`
}

// nodeMap is the same node map for both runtimes: two LLM agents whose
// answers depend only on their input (the fake server echoes it).
func nodeMap(t *testing.T, srv *llmtest.Server) (map[string]task.Node[doc], []string) {
	agent := llmAgent(t, srv)
	return map[string]task.Node[doc]{
		"outline": {
			Agent:       agent,
			SelectInput: func(s doc) (string, error) { return "outline " + s.Topic, nil },
			ApplyResult: func(s doc, r task.Result) (doc, error) {
				s.Outline = r.Text
				s.Steps = append(append([]string(nil), s.Steps...), "outline")
				return s, nil
			},
			Timeout: 400 * time.Millisecond,
		},
		"draft": {
			Agent: agent,
			SelectInput: func(s doc) (string, error) {
				if s.Outline == "" {
					return "", errors.New("no outline")
				}
				return "draft from " + s.Outline, nil
			},
			ApplyResult: func(s doc, r task.Result) (doc, error) {
				s.Draft = r.Text
				s.Steps = append(append([]string(nil), s.Steps...), "draft")
				return s, nil
			},
			Timeout: 200 * time.Millisecond,
		},
	}, []string{"outline", "draft"}
}

func echo(r llmtest.Request) llmtest.Reply {
	if strings.Contains(r.LastUser(), "hang") {
		return llmtest.Reply{Chunks: []string{"…"}, Hang: true}
	}
	return llmtest.Reply{Text: "[" + strings.ToUpper(r.LastUser()) + "]"}
}

func TestSequenceAndGraphAgree(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	srv.Respond(echo)
	nodes, order := nodeMap(t, srv)
	start := doc{Topic: "bees"}

	seq, err := task.RunSequence(t.Context(), nodes, order, start)
	if err != nil {
		t.Fatal(err)
	}
	g, err := task.Graph(nodes, order)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Invoke(t.Context(), "", graph.Replace(start))
	if err != nil {
		t.Fatal(err)
	}
	want := doc{Topic: "bees", Outline: "[OUTLINE BEES]", Draft: "[DRAFT FROM [OUTLINE BEES]]", Steps: []string{"outline", "draft"}}
	if fmt.Sprint(seq) != fmt.Sprint(want) || fmt.Sprint(res.State) != fmt.Sprint(want) {
		t.Fatalf("sequential %+v\ngraph      %+v\nwant       %+v", seq, res.State, want)
	}

	// The same failure in both: a timed-out node, and a node whose input
	// cannot be selected.
	for _, tc := range []struct {
		name  string
		start doc
		code  core.Code
	}{
		{"timeout", doc{Topic: "hang"}, core.CodeTimeout},
	} {
		_, serr := task.RunSequence(t.Context(), nodes, order, tc.start)
		_, gerr := g.Invoke(t.Context(), "", graph.Replace(tc.start))
		if core.CodeOf(serr) != tc.code || core.CodeOf(gerr) != tc.code || !errors.Is(gerr, graph.ErrNodeFailed) {
			t.Fatalf("%s: sequential %v; graph %v", tc.name, serr, gerr)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		for range 2 { // both runtimes closed their stream
			if err := srv.WaitDisconnect(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
	}
	only := map[string]task.Node[doc]{"draft": nodes["draft"]}
	_, serr := task.RunSequence(t.Context(), only, []string{"draft"}, doc{})
	g2, err := task.Graph(only, []string{"draft"})
	if err != nil {
		t.Fatal(err)
	}
	_, gerr := g2.Invoke(t.Context(), "", graph.Replace(doc{}))
	if core.CodeOf(serr) != core.CodeFailed || core.CodeOf(gerr) != core.CodeFailed {
		t.Fatalf("select failure: sequential %v; graph %v", serr, gerr)
	}
}

func TestSequenceInvalid(t *testing.T) {
	t.Parallel()
	nodes := map[string]task.Node[doc]{"a": {}}
	for _, order := range [][]string{nil, {"b"}, {"a", "a"}} {
		if _, err := task.RunSequence(t.Context(), nodes, order, doc{}); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("order %v: %v", order, err)
		}
		if _, err := task.Graph(nodes, order); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("graph order %v: %v", order, err)
		}
	}
	if _, err := task.RunSequence(t.Context(), nodes, []string{"a"}, doc{}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("empty node: %v", err)
	}
}

// Retries: a failing run is retried with backoff up to Retry.Attempts; a
// permanent failure is not; a route to no node is invalid, in both runtimes.
func TestNodeRetryAndRoute(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	flaky := task.Func(func(_ context.Context, _ string, _ task.Start, out task.Output) error {
		switch n := calls.Add(1); {
		case n < 3:
			return errors.New("transient")
		default:
			out.Text("ok")
			return nil
		}
	})
	node := task.Node[doc]{Agent: flaky,
		SelectInput: func(doc) (string, error) { return "x", nil },
		ApplyResult: func(s doc, r task.Result) (doc, error) { s.Draft = r.Text; return s, nil },
		Retry:       &actor.RetryPolicy{Attempts: 3, Backoff: time.Millisecond},
	}
	s, err := node.Run(t.Context(), doc{})
	if err != nil || s.Draft != "ok" || calls.Load() != 3 {
		t.Fatalf("state %+v err %v calls %d", s, err, calls.Load())
	}
	calls.Store(0)
	node.Retry = &actor.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}
	if _, err := node.Run(t.Context(), doc{}); !errors.Is(err, core.ErrFailed) || calls.Load() != 2 {
		t.Fatalf("err %v calls %d", err, calls.Load())
	}
	var perm atomic.Int32
	node.Agent = task.Func(func(context.Context, string, task.Start, task.Output) error {
		perm.Add(1)
		return core.Errorf(core.CodeInvalid, "x", "bad input")
	})
	if _, err := node.Run(t.Context(), doc{}); !errors.Is(err, core.ErrInvalid) || perm.Load() != 1 {
		t.Fatalf("permanent: err %v calls %d", err, perm.Load())
	}

	calls.Store(10)
	node.Agent = flaky
	node.Route = func(doc) (string, error) { return "nowhere", nil }
	nodes := map[string]task.Node[doc]{"a": node}
	if _, err := task.RunSequence(t.Context(), nodes, []string{"a"}, doc{}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("sequence: %v", err)
	}
	g, err := task.Graph(nodes, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(t.Context(), "", graph.Replace(doc{})); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("graph: %v", err)
	}
}
