package actor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// Greeting is the state of a greeter.
type Greeting struct {
	Greeted int `json:"greeted"`
}

// Example runs a node with one kind on an embedded JetStream server, creates
// an effector, sends it a record and reads what it emits and its state.
func Example() {
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
		Name: "greeter",
		Logic: func(ctx *actor.Context, s Greeting) (Greeting, error) {
			var name string
			if err := ctx.Decode(&name); err != nil {
				return s, err
			}
			s.Greeted++
			return s, ctx.Emit("greeting", "hello, "+name)
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
	rec, _ := records.New("greet", "effectors")
	sent, err := client.Send(ctx, g, rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	for emitted, err := range out {
		if err != nil {
			fmt.Println(err)
			return
		}
		var text string
		_ = emitted.Decode(&text)
		fmt.Println(emitted.Type+":", text, "from", emitted.From)
		break
	}
	// Outputs are published before the state is written: StateAt waits
	// until the state document has applied the record sent.
	doc, err := client.StateAt(ctx, g, sent.Seq)
	if err != nil {
		fmt.Println(err)
		return
	}
	var s Greeting
	_ = doc.Decode(&s)
	fmt.Println(doc.Status, s.Greeted)
	// Output:
	// greeting: hello, effectors from greeter/g1
	// IDLE 1
}

// ExampleKind_Apply unit-tests logic without NATS.
func ExampleKind_Apply() {
	counter := actor.Kind[Greeting]{
		Name: "greeter",
		Logic: func(ctx *actor.Context, s Greeting) (Greeting, error) {
			s.Greeted++
			return s, ctx.Send(records.Ref{Kind: "log", ID: "main"}, "greeted", s.Greeted)
		},
	}
	rec, _ := records.New("greet", "you")
	next, outs, err := counter.Apply(context.Background(), records.Ref{Kind: "greeter", ID: "g1"}, rec, Greeting{Greeted: 41})
	fmt.Println(next.Greeted, err)
	for _, o := range outs {
		fmt.Println(o.Subject, o.Record.Type, o.Record.From)
	}
	// Output:
	// 42 <nil>
	// ea.mbox.log.main greeted greeter/g1
}
