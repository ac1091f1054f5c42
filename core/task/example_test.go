package task_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/task"
)

func ExampleCollect() {
	agent := task.Func(func(ctx context.Context, input string, _ task.Start, out task.Output) error {
		out.Text("Hello, ")
		out.Event(task.Event{Type: "progress"})
		out.Text(input)
		return nil
	})
	res, err := task.Collect(context.Background(), agent, "world", task.With(task.Start{Session: "s1"}))
	fmt.Printf("%q %d event(s) session=%s partial=%v err=%v\n", res.Text, len(res.Events), res.Session, res.Partial, err)

	slow := task.Func(func(ctx context.Context, _ string, _ task.Start, out task.Output) error {
		out.Text("thinking…")
		<-ctx.Done() // stops when Collect cancels the run
		return ctx.Err()
	})
	res, err = task.Collect(context.Background(), slow, "x", task.Timeout(20*time.Millisecond))
	fmt.Printf("%q partial=%v timeout=%v\n", res.Text, res.Partial, errors.Is(err, core.ErrTimeout))
	// Output:
	// "Hello, world" 1 event(s) session=s1 partial=false err=<nil>
	// "thinking…" partial=true timeout=true
}
