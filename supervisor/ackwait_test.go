package supervisor_test

import (
	"context"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go/jetstream"
)

// TestResultTakenByDeadSupervisor: a worker's result is delivered to a
// supervisor that dies before acknowledging it (a pull on the supervisors'
// consumer that never acknowledges, as a killed process leaves it). Another
// supervisor with the default options applies it within the default ack
// wait plus a margin — not after the 30 s the consumers once had. Both
// supervisors run with the default options (startSupervisor).
func TestResultTakenByDeadSupervisor(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	c := newClient(t, conn)
	ctx := ctxT(t)

	// The first task's worker holds it until the gate opens.
	gate := make(chan struct{})
	a := kinds.TaskA()
	logic := a.Logic
	a.Logic = func(ctx *actor.Context, st kinds.TaskState) (kinds.TaskState, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return st, ctx.Err()
		}
		return logic(ctx, st)
	}
	actortest.StartNode(t, conn, actor.Options{ShutdownGrace: 5 * time.Second, Logger: quiet}, a, kinds.TaskB())
	first := startSupervisor(t, conn)
	id, err := c.Start(ctx, "demo", demo.Input{Text: "x y"})
	if err != nil {
		t.Fatal(err)
	}
	begun, err := c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	first.Stop(t)

	// The dying supervisor's pull: the only one waiting on the consumer.
	ref, ok := conn.Names().RefOf(first.Mailbox(id))
	if !ok {
		t.Fatalf("mailbox %s names no effector", first.Mailbox(id))
	}
	stream, err := conn.MailboxStreamOf(ctx, conn.Names().GroupOf(ref))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.Consumer(ctx, supervisor.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan time.Time, 1)
	go func() {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Minute))
		if err != nil {
			return
		}
		for range batch.Messages() {
			taken <- time.Now() // and never acknowledged
		}
	}()
	actortest.Eventually(t, 10*time.Second, "the dying supervisor's pull waiting", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting > 0
	})

	close(gate) // the worker answers: the result goes to the pull above
	var at time.Time
	select {
	case at = <-taken:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker's result never reached the dying supervisor's pull")
	}
	startSupervisor(t, conn)
	limit := supervisor.DefaultAckWait + 3*time.Second
	for {
		o, err := c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Steps > begun.Steps {
			t.Logf("result applied %s after a dead supervisor took it", time.Since(at).Round(time.Millisecond))
			return
		}
		if time.Since(at) > limit {
			t.Fatalf("result not applied %s after a dead supervisor took it (steps %d): want within the ack wait %s plus 3s", time.Since(at).Round(time.Millisecond), o.Steps, supervisor.DefaultAckWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
