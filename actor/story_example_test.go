package actor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// Example_stateRecords shows the log telling an effector's whole story: with
// Kind.StateRecords its outbox holds, besides what it emits, a state record
// after each state write, and terminating it writes an end record, after
// which Subscribe ends.
func Example_stateRecords() {
	dir, _ := os.MkdirTemp("", "effectors-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	if err := conn.Provision(ctx); err != nil {
		fmt.Println(err)
		return
	}
	greeter := actor.Kind[Greeting]{
		Name:         "greeter",
		StateRecords: true,
		Logic: func(ctx *actor.Context, s Greeting) (Greeting, error) {
			s.Greeted++
			return s, ctx.Emit("greeting", "hello")
		},
	}
	node, _ := actor.NewNode(conn, actor.Options{Logger: quiet})
	if err := node.Host(greeter); err != nil {
		fmt.Println(err)
		return
	}
	nodeCtx, stopNode := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- node.Run(nodeCtx) }()
	defer func() { stopNode(); <-stopped }()
	if err := node.WaitReady(ctx); err != nil {
		fmt.Println(err)
		return
	}

	client, _ := actor.NewClient(ctx, conn)
	g := records.Ref{Kind: "greeter", ID: "g1"}
	if _, err := client.Create(ctx, g, nil); err != nil {
		fmt.Println(err)
		return
	}
	out, _ := client.Subscribe(ctx, g)
	rec, _ := records.New("greet", nil)
	rec.Process = "visit-1"
	if _, err := client.Send(ctx, g, rec); err != nil {
		fmt.Println(err)
		return
	}
	for r, err := range out {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch r.Type {
		case actor.TypeState:
			var doc actor.Document
			_ = json.Unmarshal(r.Payload, &doc)
			var s Greeting
			_ = doc.Decode(&s)
			fmt.Printf("state: greeted %d, process %s, caused by the record sent: %v\n", s.Greeted, r.Process, r.Cause == rec.ID)
			if _, err := client.Terminate(ctx, g); err != nil {
				fmt.Println(err)
				return
			}
		default:
			fmt.Println(r.Type)
		}
	}
	fmt.Println("subscription ended")
	// Output:
	// greeting
	// state: greeted 1, process visit-1, caused by the record sent: true
	// end
	// subscription ended
}
