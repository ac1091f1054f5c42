package actor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// ExampleClient_Activate loads an effector ahead of traffic, reads its state
// as JSON the way any NATS client can (ea.ctl.state.<kind>), and shows a
// control error turned back into its typed error.
func ExampleClient_Activate() {
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
	node, _ := actor.NewNode(conn, actor.Options{Logger: quiet})
	if err := node.Host(actor.Kind[Greeting]{Name: "greeter", Logic: func(_ *actor.Context, s Greeting) (Greeting, error) { return s, nil }}); err != nil {
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
	if _, err := client.Create(ctx, g, Greeting{Greeted: 2}); err != nil {
		fmt.Println(err)
		return
	}
	doc, err := client.Activate(ctx, g) // loaded into the node reading its partition
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("activated", doc.Ref(), doc.Status)

	reply, err := conn.NATS().RequestWithContext(ctx, conn.Names().Control("state", "greeter"), []byte(`{"id":"g1"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var got struct {
		Status string         `json:"status"`
		State  map[string]any `json:"state"`
	}
	if err := json.Unmarshal(reply.Data, &got); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("state endpoint:", got.Status, got.State)

	_, err = client.Activate(ctx, records.Ref{Kind: "greeter", ID: "nobody"})
	var ce *actor.ControlError
	fmt.Println(errors.Is(err, actor.ErrNotFound), errors.As(err, &ce) && ce.Code == 404 && ce.Reason == "not_found")
	// Output:
	// activated greeter/g1 IDLE
	// state endpoint: IDLE map[greeted:2]
	// true true
}
