package actor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// outboxTypes returns the types of every record stored on ref's outbox, in
// order.
func outboxTypes(t *testing.T, conn *bus.Conn, ref records.Ref) []string {
	t.Helper()
	ctx := ctxT(t)
	names := conn.Names()
	stream, filter, _ := names.Stored(names.Outbox(ref))
	cons, err := conn.JetStream().OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 {
			return types
		}
		batch, err := cons.Fetch(int(min(info.NumPending, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			types = append(types, m.Headers().Get(records.HeaderType))
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
	}
}

// TestTerminateWaitsForRun: terminate cancels the logic in hand (cause
// ErrCancelled and ErrTerminated) and writes the end record only once the
// effector stopped: logic that goes on streaming after its context ended
// (it should not, but may) still publishes before the end record, never
// after it.
func TestTerminateWaitsForRun(t *testing.T) {
	_, conn := server(t)
	started := make(chan context.Context, 1)
	release := make(chan struct{})
	kind := actor.Kind[int]{
		Name:  "stubborn",
		Retry: actor.RetryPolicy{Attempts: 1},
		Logic: func(ctx *actor.Context, s int) (int, error) {
			if err := ctx.EmitNow("tick", nil); err != nil {
				return s, err
			}
			started <- ctx
			<-ctx.Done()
			<-release // ignores its context for a while
			if err := ctx.EmitNow("late", nil); err != nil {
				return s, err
			}
			return s + 1, nil
		},
	}
	n := startNode(t, conn, nil, kind)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the node stops, even when the test fails
	c := newClient(t, conn)
	ctx := ctxT(t)
	r := ref("stubborn", "s1")
	if _, err := c.Create(ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	in, _ := records.New("go", nil)
	if _, err := c.Send(ctx, r, in); err != nil {
		t.Fatal(err)
	}
	logicCtx := <-started
	// The node subject alone does not interrupt a live effector.
	node := conn.Names().NodeControl(n.ID(), "interrupt", "stubborn")
	if _, err := conn.NATS().Request(node, []byte(r.ID), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if logicCtx.Err() != nil {
		t.Fatal("an interrupt request cancelled the logic of an effector that is not terminated")
	}
	terminated := make(chan error, 1)
	go func() {
		_, err := c.Terminate(ctx, r)
		terminated <- err
	}()
	<-logicCtx.Done()
	if cause := context.Cause(logicCtx); !errors.Is(cause, actor.ErrTerminated) || !errors.Is(cause, actor.ErrCancelled) {
		t.Fatalf("cause %v: want ErrCancelled and ErrTerminated", cause)
	}
	// While the logic still runs, terminate waits and no end record is
	// written (checked for a second: it would come in milliseconds).
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-terminated:
			t.Fatalf("terminate returned (%v) while the logic still ran", err)
		case <-time.After(20 * time.Millisecond):
		}
		for _, typ := range outboxTypes(t, conn, r) {
			if typ == actor.TypeEnd {
				t.Fatal("end record written while the logic still ran")
			}
		}
	}
	unblock()
	if err := <-terminated; err != nil {
		t.Fatal(err)
	}
	types := outboxTypes(t, conn, r)
	if len(types) != 3 || types[0] != "tick" || types[1] != "late" || types[2] != actor.TypeEnd {
		t.Fatalf("outbox %v: want tick, late, end", types)
	}
	doc, err := c.State(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != actor.StatusTerminated {
		t.Fatalf("status %s", doc.Status)
	}
}
