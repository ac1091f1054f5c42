package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/effectors/effectors/graph"
)

// TestStreamModes: values (the input state first), updates with task ids
// (two Send runs of one node told apart), custom values and message
// chunks as nodes write them, task events with errors, debug checkpoints,
// all in one stream.
func TestStreamModes(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("plan", func(ctx context.Context, s st) (graph.Update[st], error) {
		graph.WriteCustom(ctx, map[string]int{"progress": 50})
		for _, tok := range []string{"Hel", "lo"} {
			graph.WriteMessage(ctx, tok)
		}
		return graph.Updates(f.log.Set([]string{"plan"})), nil
	})
	b.AddNode("work", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Updates(f.log.Set([]string{"work " + s.Item})), nil
	})
	b.AddEdge(graph.START, "plan")
	b.AddSends("plan", func(ctx context.Context, s st) ([]graph.Send[st], error) {
		return []graph.Send[st]{{Node: "work", State: st{Item: "x"}}, {Node: "work", State: st{Item: "y"}}}, nil
	})
	g := mustCompile(t, b, graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)

	all := graph.WithStreamModes(graph.StreamValues, graph.StreamUpdates, graph.StreamCustom, graph.StreamMessages, graph.StreamTasks)
	var got []string
	var values [][]string
	workTasks := map[string]string{}
	for ev, err := range g.Stream(ctx, "t", graph.Updates(f.name.Set("in")), all) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Mode {
		case graph.StreamValues:
			values = append(values, ev.State.Log)
			if len(values) == 1 && ev.State.Name != "in" {
				t.Fatalf("first values event %+v: want the input state", ev.State)
			}
			got = append(got, fmt.Sprintf("values@%d", ev.Step))
		case graph.StreamUpdates:
			if ev.Task == "" || len(ev.Writes) != 1 || ev.Writes[0].Task != ev.Task {
				t.Fatalf("update event %+v", ev)
			}
			if ev.Node == "work" {
				workTasks[ev.Task] = ev.Writes[0].Value.([]string)[0]
			}
			got = append(got, "update:"+ev.Node)
		case graph.StreamCustom:
			got = append(got, fmt.Sprintf("custom:%s:%v", ev.Node, ev.Data))
		case graph.StreamMessages:
			got = append(got, fmt.Sprintf("msg:%s:%v", ev.Node, ev.Data))
		case graph.StreamTasks:
			if ev.Task == "" || ev.Err != nil {
				t.Fatalf("task event %+v", ev)
			}
			got = append(got, ev.Kind+":"+ev.Node)
		default:
			t.Fatalf("event of mode %v", ev.Mode)
		}
	}
	want := []string{
		"values@0",
		"task:plan", "custom:plan:map[progress:50]", "msg:plan:Hel", "msg:plan:lo", "task_result:plan",
		"update:plan", "values@1",
	}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("events\n%v\nwant to start with\n%v", got, want)
	}
	rest := got[len(want):]
	if n := len(rest); n != 7 || !slices.Equal(rest[4:], []string{"update:work", "update:work", "values@2"}) {
		t.Fatalf("events of step 2: %v", rest)
	}
	if len(workTasks) != 2 || !slices.Contains(slices.Collect(mapValues(workTasks)), "work x") {
		t.Fatalf("Send runs not told apart by task: %v", workTasks)
	}
	if !slices.Equal(values[0], nil) || !slices.Equal(values[2], []string{"plan", "work x", "work y"}) {
		t.Fatalf("values %v", values)
	}
	if graph.StreamValues.String() != "values" || (graph.StreamValues|graph.StreamDebug).String() != "values|debug" {
		t.Fatalf("mode names %q", (graph.StreamValues | graph.StreamDebug).String())
	}
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestStreamDebugAndErrors: debug mode yields a checkpoint event after each
// checkpoint and task events whose Err carries a node's failure or
// interrupt (ErrInterrupted); a subgraph's custom parts reach the parent's
// stream with their namespace.
func TestStreamDebugAndErrors(t *testing.T) {
	var prepRuns atomic.Int32
	child := childGraph(t, &prepRuns, nil)
	g := parentGraph(t, child, graph.NewMemorySaver(0))
	ctx := ctxT(t)
	var checkpoints, interrupted int
	var custom []string
	for ev, err := range g.Stream(ctx, "d", graph.Update[st]{}, graph.WithStreamModes(graph.StreamDebug, graph.StreamCustom)) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Mode == graph.StreamDebug && ev.Kind == "checkpoint":
			if ev.Checkpoint == "" {
				t.Fatalf("debug checkpoint without id: %+v", ev)
			}
			checkpoints++
		case ev.Mode == graph.StreamDebug && ev.Kind == "task_result" && errors.Is(ev.Err, graph.ErrInterrupted):
			interrupted++
		case ev.Mode == graph.StreamCustom:
			if !strings.HasPrefix(ev.Namespace, "sub:") || ev.Node != "prep" {
				t.Fatalf("custom part from the child %+v", ev)
			}
			custom = append(custom, ev.Data.(string))
		case ev.Mode == 0:
			if len(ev.Interrupts) != 1 {
				t.Fatalf("final event %+v", ev)
			}
		}
	}
	// input, after start, partial at sub: 3 checkpoints; the interrupt is
	// reported by the child's ask task and by the parent's sub task.
	if checkpoints != 3 || interrupted != 2 || !slices.Equal(custom, []string{"prep ran"}) {
		t.Fatalf("checkpoints %d, interrupted task events %d, custom %v", checkpoints, interrupted, custom)
	}

	// A failing node: its task_result carries the error, then the stream ends with it.
	b, _ := newBuilder()
	b.AddNode("bad", func(ctx context.Context, s st) (graph.Update[st], error) {
		return graph.Update[st]{}, errors.New("boom")
	})
	b.AddEdge(graph.START, "bad")
	g2 := mustCompile(t, b)
	var taskErr, endErr error
	for ev, err := range g2.Stream(ctx, "", graph.Update[st]{}, graph.WithStreamModes(graph.StreamTasks)) {
		if err != nil {
			endErr = err
			break
		}
		if ev.Kind == "task_result" {
			taskErr = ev.Err
		}
	}
	if taskErr == nil || taskErr.Error() != "boom" || !errors.Is(endErr, graph.ErrNodeFailed) {
		t.Fatalf("task error %v, end %v", taskErr, endErr)
	}
}

// TestStreamModesBreak: breaking out of a moded stream stops the run after
// the step in progress, leaving no goroutine behind (goleak in TestMain).
func TestStreamModesBreak(t *testing.T) {
	b, f := newBuilder()
	b.AddNode("spin", func(ctx context.Context, s st) (graph.Update[st], error) {
		graph.WriteCustom(ctx, s.Count)
		return graph.Updates(f.count.Set(s.Count + 1)), nil
	})
	b.AddEdge(graph.START, "spin").AddEdge("spin", "spin")
	g := mustCompile(t, b, graph.WithRecursionLimit(1000), graph.WithCheckpointer(graph.NewMemorySaver(0)))
	ctx := ctxT(t)
	n := 0
	for range g.Stream(ctx, "b", graph.Update[st]{}, graph.WithStreamModes(graph.StreamCustom)) {
		n++
		if n == 3 {
			break
		}
	}
	snap, err := g.State(ctx, "b")
	if err != nil || snap.State.Count != 3 {
		t.Fatalf("after break at the third custom value: count %d, %v; want 3 (the step in progress finished)", snap.State.Count, err)
	}
}

// TestStreamSubgraphs: with StreamSubgraphs the child's values and updates
// reach the parent's stream with the child's namespace, the child's state
// in Data; without it, only the parent's.
func TestStreamSubgraphs(t *testing.T) {
	var prepRuns atomic.Int32
	child := childGraph(t, &prepRuns, nil)
	g := parentGraph(t, child, graph.NewMemorySaver(0))
	ctx := ctxT(t)
	for _, sub := range []bool{true, false} {
		modes := []graph.StreamMode{graph.StreamValues, graph.StreamUpdates}
		if sub {
			modes = append(modes, graph.StreamSubgraphs)
		}
		var childValues []inner
		var childUpdates []string
		parentValues := 0
		thread := fmt.Sprintf("s%v", sub)
		for ev, err := range g.Stream(ctx, thread, graph.Update[st]{}, graph.WithStreamModes(modes...)) {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case ev.Namespace == "" && ev.Mode == graph.StreamValues:
				parentValues++
			case ev.Mode == graph.StreamValues:
				if !strings.HasPrefix(ev.Namespace, "sub:") {
					t.Fatalf("child event namespace %q", ev.Namespace)
				}
				childValues = append(childValues, ev.Data.(inner))
			case ev.Mode == graph.StreamUpdates && ev.Namespace != "":
				childUpdates = append(childUpdates, ev.Node)
			}
		}
		if !sub {
			if len(childValues)+len(childUpdates) != 0 {
				t.Fatalf("without StreamSubgraphs: child events %v %v", childValues, childUpdates)
			}
			continue
		}
		// The child runs prep then asks: values after its input and after prep.
		if len(childValues) != 2 || !slices.Equal(childValues[1].Steps, []string{"from ", "prep"}) || !slices.Equal(childUpdates, []string{"prep"}) || parentValues != 2 {
			t.Fatalf("child values %+v, updates %v, parent values %d", childValues, childUpdates, parentValues)
		}
	}
}
