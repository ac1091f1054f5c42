package node_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/greeter"
	"github.com/effectors/effectors/node"
	"github.com/effectors/effectors/records"
)

// A node binary for your own kind is one line:
//
//	func main() { node.Main(greeter.Kind()) }
//
// This example runs the same command in-process, with an embedded NATS
// server on a free port, and drives the greeter through it: the banner
// hands over the URL the node serves on.
func ExampleCommand() {
	dir, _ := os.MkdirTemp("", "node-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ready := make(chan node.Info, 1)
	cmd := node.Command{
		Name:   "greeter-node",
		Kinds:  []actor.Definition{greeter.Kind()},
		Banner: func(in node.Info) string { ready <- in; return "" },
	}
	args := []string{"--listen", "127.0.0.1:0", "--store", dir, "--metrics", "off", "--log-level", "error"}
	nodeCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Run(nodeCtx, args, func(string) string { return "" }, io.Discard, io.Discard) }()
	defer func() { stop(); <-stopped }()

	var in node.Info
	select {
	case in = <-ready:
	case err := <-stopped:
		fmt.Println("node stopped:", err)
		return
	}
	fmt.Println("kinds:", in.Kinds, "embedded:", in.Embedded)

	conn, err := bus.Connect(ctx, bus.Config{URL: in.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client, _ := actor.NewClient(ctx, conn)
	g1 := records.Ref{Kind: greeter.KindName, ID: "g1"}
	if _, err := client.Create(ctx, g1, nil); err != nil {
		fmt.Println(err)
		return
	}
	out, _ := client.Subscribe(ctx, g1)
	rec, _ := records.New("greet", greeter.Greet{Name: "ada"})
	if _, err := client.Send(ctx, g1, rec); err != nil {
		fmt.Println(err)
		return
	}
	for emitted, err := range out {
		if err != nil {
			fmt.Println(err)
			return
		}
		var g greeter.Greeting
		_ = emitted.Decode(&g)
		fmt.Println(emitted.Type+":", g.Text)
		break
	}
	// Output:
	// kinds: [greeter] embedded: true
	// greeting: hello, ada
}
