package graph_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/effectors/effectors/graph"
)

// TestWorkflow: an entrypoint with two Once steps and an Ask: resuming
// re-runs the function from its start without repeating the steps; after
// a failure, Continue replays the recorded steps too.
func TestWorkflow(t *testing.T) {
	var drafts, reviews atomic.Int32
	var failOnce atomic.Bool
	w, err := graph.Entrypoint(func(ctx context.Context, topic string) (string, error) {
		draft, err := graph.Once(ctx, func(ctx context.Context) (string, error) {
			drafts.Add(1)
			return "essay on " + topic, nil
		})
		if err != nil {
			return "", err
		}
		review, err := graph.Once(ctx, func(ctx context.Context) (int, error) {
			reviews.Add(1)
			return len(draft), nil
		})
		if err != nil {
			return "", err
		}
		if failOnce.CompareAndSwap(true, false) {
			return "", errors.New("crashed after the steps")
		}
		ok, err := graph.Ask[bool](ctx, draft)
		if err != nil {
			return "", err
		}
		if !ok {
			return "rejected", nil
		}
		return strings.ToUpper(draft) + " " + strings.Repeat("*", review/5), nil
	}, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	res, err := w.Invoke(ctx, "w1", "otters")
	var q string
	if err != nil || !res.Interrupted() || res.Interrupts[0].Decode(&q) != nil || q != "essay on otters" {
		t.Fatalf("invoke: %+v, %v", res, err)
	}
	res, err = w.Resume(ctx, "w1", true)
	if err != nil || res.Output != "ESSAY ON OTTERS ***" {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	if drafts.Load() != 1 || reviews.Load() != 1 {
		t.Fatalf("steps ran %d, %d times; want once each", drafts.Load(), reviews.Load())
	}

	failOnce.Store(true)
	if _, err := w.Invoke(ctx, "w2", "seals"); !errors.Is(err, graph.ErrNodeFailed) {
		t.Fatalf("failing run: %v", err)
	}
	res, err = w.Continue(ctx, "w2")
	if err != nil || !res.Interrupted() {
		t.Fatalf("continue: %+v, %v", res, err)
	}
	if res, err = w.Resume(ctx, "w2", false); err != nil || res.Output != "rejected" {
		t.Fatalf("resume w2: %+v, %v", res, err)
	}
	if drafts.Load() != 2 || reviews.Load() != 2 {
		t.Fatalf("after a failure: steps ran %d, %d times; want twice each (once per thread)", drafts.Load(), reviews.Load())
	}
	if _, err := graph.Entrypoint[string, string](nil); !errors.Is(err, graph.ErrInvalidGraph) {
		t.Fatalf("nil entrypoint: %v", err)
	}
	if v, err := graph.Once(ctx, func(context.Context) (int, error) { return 7, nil }); err != nil || v != 7 {
		t.Fatalf("Once outside a node: %v, %v", v, err)
	}
}
