package task_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/records"
)

// chunker is an agent that sends n chunks of text, an event after half of
// them when event is set, pausing pace between chunks.
func chunker(n int, event bool, pace time.Duration) task.Func {
	return func(ctx context.Context, _ string, _ task.Start, out task.Output) error {
		for i := range n {
			if event && i == n/2 {
				out.Event(task.Event{Type: "progress"})
			}
			out.Text("tok ")
			if pace > 0 {
				select {
				case <-time.After(pace): // the load: a model sending a token every pace
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	}
}

// runRecords runs one task on ref and returns the types of the records of
// the run on its outbox, the text of its chunks and its task.done.
func runRecords(t testing.TB, client *actor.Client, ref records.Ref) (types []string, text string, done task.Done) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := client.Subscribe(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := records.New(task.TypeTask, task.Request{Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Process = records.NewID()
	if _, err := client.Send(ctx, ref, rec); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for out, err := range outs {
		if err != nil {
			t.Fatal(err)
		}
		if out.Process != rec.Process {
			continue
		}
		types = append(types, out.Type)
		switch out.Type {
		case task.TypeChunk:
			var c task.Chunk
			if err := out.Decode(&c); err != nil {
				t.Fatal(err)
			}
			b.WriteString(c.Text)
		case task.TypeDone:
			if err := out.Decode(&done); err != nil {
				t.Fatal(err)
			}
			return types, b.String(), done
		case task.TypeError:
			t.Fatalf("the run failed: %s", out.Payload)
		}
	}
	t.Fatal("the outbox ended before task.done")
	return
}

// TestKindCoalescesText: a task kind gathers streamed text into fewer
// task.chunk records by size, publishes what it gathered before an event
// and before the end, and loses nothing; with core.NoCoalesce every chunk
// is a record.
func TestKindCoalescesText(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	bySize := core.Coalesce{Delay: time.Hour, Bytes: 400} // 100 chunks of "tok "
	actortest.StartNode(t, srv.Connect(t), actor.Options{},
		task.Kind("sized", chunker(500, false, 0), task.CoalesceText(bySize)),
		task.Kind("evented", chunker(20, true, 0), task.CoalesceText(bySize)),
		task.Kind("each", chunker(500, false, 0), task.CoalesceText(core.NoCoalesce)),
		task.Kind("paced", chunker(3, false, 200*time.Millisecond), task.CoalesceText(core.Coalesce{Delay: time.Millisecond})))
	client, err := actor.NewClient(t.Context(), srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("tok ", 500)
	for _, tc := range []struct {
		kind  string
		types string
		text  string
	}{
		{"sized", strings.Repeat("task.chunk ", 5) + "task.done", want},
		{"evented", "task.chunk task.event task.chunk task.done", strings.Repeat("tok ", 20)},
		{"each", strings.Repeat("task.chunk ", 500) + "task.done", want},
		// Text is not held for more: each chunk, 200ms apart, goes out
		// after its delay of 1ms, before the next comes.
		{"paced", "task.chunk task.chunk task.chunk task.done", "tok tok tok "},
	} {
		ref := records.Ref{Kind: tc.kind, ID: "x"}
		if _, err := client.Create(t.Context(), ref, nil); err != nil {
			t.Fatal(err)
		}
		types, text, done := runRecords(t, client, ref)
		if got := strings.Join(types, " "); got != tc.types {
			t.Errorf("%s: records %q, want %q", tc.kind, got, tc.types)
		}
		if text != tc.text {
			t.Errorf("%s: text %q, want %q", tc.kind, text, tc.text)
		}
		if done.Chunks != strings.Count(strings.Join(types, " "), task.TypeChunk) {
			t.Errorf("%s: task.done counts %d chunks, %d were published", tc.kind, done.Chunks, strings.Count(strings.Join(types, " "), task.TypeChunk))
		}
	}
}
