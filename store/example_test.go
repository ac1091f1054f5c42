package store_test

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
	"github.com/effectors/effectors/store"
)

// Example runs a node and a store server on an embedded JetStream server,
// sends an effector two records of one process, and reads the process
// back from the log, then lists the kind's effectors.
func Example() {
	dir, _ := os.MkdirTemp("", "effectors-store-example")
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

	// A node hosting one kind.
	greeter := actor.Kind[int]{
		Name: "greeter",
		Logic: func(ctx *actor.Context, n int) (int, error) {
			var name string
			if err := ctx.Decode(&name); err != nil {
				return n, err
			}
			return n + 1, ctx.Emit("greeting", "hello, "+name)
		},
	}
	node, _ := actor.NewNode(conn, actor.Options{Logger: quiet})
	if err := node.Host(greeter); err != nil {
		fmt.Println(err)
		return
	}
	// The store server: indexer and the <prefix>.store.* service.
	srv, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{}, 2)
	go func() { _ = node.Run(runCtx); stopped <- struct{}{} }()
	go func() { _ = srv.Run(runCtx); stopped <- struct{}{} }()
	defer func() { stop(); <-stopped; <-stopped }()
	if err := node.WaitReady(ctx); err != nil {
		fmt.Println(err)
		return
	}

	ac, _ := actor.NewClient(ctx, conn)
	g := records.Ref{Kind: "greeter", ID: "g1"}
	if _, err := ac.Create(ctx, g, nil); err != nil {
		fmt.Println(err)
		return
	}
	for i, name := range []string{"ada", "grace"} {
		rec, _ := records.New("greet", name)
		rec.ID, rec.Process = fmt.Sprintf("greet-%d", i), "welcome"
		if _, err := ac.Send(ctx, g, rec); err != nil {
			fmt.Println(err)
			return
		}
	}

	// Read the process back: what the effector received and emitted.
	sc := srv.Client()
	q := store.Query{Process: "welcome", Box: store.BoxOutbox}
	var page store.Page
	for len(page.Records) < 2 { // the indexer follows the log within milliseconds
		time.Sleep(10 * time.Millisecond)
		if page, err = sc.Query(ctx, q); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, r := range page.Records {
		var text string
		_ = r.Decode(&text)
		fmt.Println(r.Box, r.Effector, r.Type, text, "caused by", r.Cause)
	}
	n, _ := sc.Count(ctx, store.Query{Process: "welcome"})
	fmt.Println("records in process welcome:", n)

	one, _ := sc.Get(ctx, "greet-1")
	fmt.Println("get greet-1:", one.Box, one.Subject)

	effs, _ := sc.Effectors(ctx, store.EffectorQuery{Kind: "greeter"})
	for _, e := range effs.Effectors {
		fmt.Println("effector", e.Ref())
	}

	// The same over NATS, as any language would ask.
	reply, _ := conn.NATS().RequestWithContext(ctx, "ea.store.count", []byte(`{"process":"welcome","box":"mailbox"}`))
	var count store.CountJSON
	_ = json.Unmarshal(reply.Data, &count)
	fmt.Println("mailbox records over NATS:", count.Count)
	// Output:
	// outbox greeter/g1 greeting hello, ada caused by greet-0
	// outbox greeter/g1 greeting hello, grace caused by greet-1
	// records in process welcome: 4
	// get greet-1: mailbox ea.mbox.greeter.g1
	// effector greeter/g1
	// mailbox records over NATS: 2
}
