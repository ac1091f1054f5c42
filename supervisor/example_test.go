package supervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/effectors/effectors/examples/demo"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/supervisor"
)

// The demo orchestration from start to end, on an embedded NATS server:
// a node hosts the workers, a supervisor runs the orchestration, a client
// starts it, gives it its input and reads its results.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "supervisor-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
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

	// The workers: task-a and task-b on a node.
	node, _ := actor.NewNode(conn, actor.Options{Logger: quiet})
	_ = node.Host(kinds.TaskA(), kinds.TaskB())
	// The supervisor with the demo orchestration.
	sup, _ := supervisor.New(conn, supervisor.Options{Logger: quiet})
	demoDef, _ := demo.Definition()
	_ = sup.Register(demoDef)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { _ = node.Run(runCtx); done <- struct{}{} }()
	go func() { _ = sup.Run(runCtx); done <- struct{}{} }()
	defer func() { stop(); <-done; <-done }()
	if err := node.WaitReady(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for !sup.Ready() { // a Supervisor has no WaitReady
		time.Sleep(10 * time.Millisecond)
	}

	client, _ := supervisor.NewClient(conn)
	id, err := client.Start(ctx, "demo", map[string]any{"text": "hello world"})
	if err != nil {
		fmt.Println(err)
		return
	}
	wait := func(want supervisor.Status) supervisor.Orchestration {
		for {
			o, err := client.Status(ctx, id)
			if err != nil || o.Status == want || o.Status.Final() {
				return o
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	o := wait(supervisor.StatusWaiting)
	fmt.Println(o.Status, o.Step, o.WaitingFor)
	if _, err := client.Input(ctx, id, map[string]string{"note": "from me"}); err != nil {
		fmt.Println(err)
		return
	}
	o = wait(supervisor.StatusCompleted)
	var r demo.Results
	_ = json.Unmarshal(o.Results, &r)
	fmt.Println(o.Status)
	fmt.Printf("a=%q b=%q\n", r.A, r.B)
	// Output:
	// WAITING ask input
	// COMPLETED
	// a="HELLO WORLD" b="me from WORLD HELLO"
}
