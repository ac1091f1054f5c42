package actor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
)

// streamer emits a chunk at once for each "task" record, then waits for its
// context: a cancel record of the same process ends it.
type streamState struct {
	Done      int `json:"done"`
	Cancelled int `json:"cancelled"`
}

func streamer(graceful bool) actor.Kind[streamState] {
	return actor.Kind[streamState]{
		Name: "streamer",
		Logic: func(ctx *actor.Context, s streamState) (streamState, error) {
			switch ctx.Record().Type {
			case actor.TypeCancel:
				return s, nil
			case "task":
			default:
				return s, actor.UnknownType(ctx.Record().Type)
			}
			for i := range 3 {
				if err := ctx.EmitNow("chunk", map[string]int{"n": i}); err != nil {
					return s, err
				}
			}
			select {
			case <-ctx.Done():
				if !errors.Is(context.Cause(ctx), actor.ErrCancelled) {
					return s, context.Cause(ctx)
				}
				if graceful {
					s.Cancelled++
					return s, ctx.Emit("cancelled", nil)
				}
				return s, context.Cause(ctx)
			case <-time.After(time.Minute):
				s.Done++
				return s, nil
			}
		},
	}
}

func TestCancelRecordStopsStreamingLogic(t *testing.T) {
	t.Parallel()
	for _, graceful := range []bool{false, true} {
		name := map[bool]string{false: "logic fails", true: "logic ends cleanly"}[graceful]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, conn := server(t)
			startNode(t, conn, nil, streamer(graceful))
			c := newClient(t, conn)
			ctx := ctxT(t)
			r := ref("streamer", "s1")
			if _, err := c.Create(ctx, r, nil); err != nil {
				t.Fatal(err)
			}
			out, err := c.Subscribe(ctx, r, actor.FromStart())
			if err != nil {
				t.Fatal(err)
			}
			task, _ := records.New("task", nil)
			task.Process = "p1"
			if _, err := c.Send(ctx, r, task); err != nil {
				t.Fatal(err)
			}
			var chunks []string
			for rec, err := range out {
				if err != nil {
					t.Fatal(err)
				}
				chunks = append(chunks, rec.ID)
				if len(chunks) == 3 {
					break
				}
			}
			for i, id := range chunks { // streamed while the logic still runs
				if want := task.ID + ":s" + string(rune('0'+i)) + "."; !strings.HasPrefix(id, want) || !signedTag.MatchString(id[len(want):]) {
					t.Fatalf("chunk %d has id %s, want %s<tag>", i, id, want)
				}
			}
			cancel, _ := records.New(actor.TypeCancel, nil)
			cancel.Process, cancel.Priority = "p1", records.PriorityHigh
			if _, err := c.Send(ctx, r, cancel); err != nil {
				t.Fatal(err)
			}
			actortest.Eventually(t, 30*time.Second, "both records applied", func() bool {
				doc, err := c.State(ctx, r)
				return err == nil && doc.Seq >= 2
			})
			doc, err := c.State(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			var s streamState
			if err := doc.Decode(&s); err != nil {
				t.Fatal(err)
			}
			if s.Done != 0 {
				t.Fatalf("logic ran to its end: %+v", s)
			}
			if graceful {
				if s.Cancelled != 1 {
					t.Fatalf("cancelled = %d, want 1", s.Cancelled)
				}
				return
			}
			dead, err := c.DeadLetters(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			for dl, err := range dead {
				if err != nil {
					t.Fatal(err)
				}
				if dl.Reason != "cancelled" || dl.Record.ID != "dead:"+task.ID || dl.Error == "" {
					t.Fatalf("dead letter %s reason %s error %q, want dead:%s reason cancelled with an error", dl.Record.ID, dl.Reason, dl.Error, task.ID)
				}
				break
			}
		})
	}
}

func TestEmitNowInApply(t *testing.T) {
	t.Parallel()
	rec, _ := records.New("task", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, outs, err := streamer(false).Apply(ctx, ref("streamer", "a"), rec, streamState{})
	if err == nil {
		t.Fatal("logic should fail when its context ends")
	}
	if outs != nil {
		t.Fatalf("a failed Apply returns no outputs, got %d", len(outs))
	}
}
