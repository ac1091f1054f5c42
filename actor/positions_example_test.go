package actor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// ExampleFromPositions follows every greeter on a deployment with 3 stream
// groups (a kind's outputs in 3 outbox streams), stops, and resumes from a
// position per stream, kept as a string: exactly the outputs it had not
// read come, whatever their stream.
func ExampleFromPositions() {
	dir, _ := os.MkdirTemp("", "effectors-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: quiet, Partitions: 8, Groups: 3})
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
	greeters := []records.Ref{{Kind: "greeter", ID: "g1"}, {Kind: "greeter", ID: "g2"}, {Kind: "greeter", ID: "g3"}, {Kind: "greeter", ID: "g4"}}
	for _, g := range greeters {
		if _, err := client.Create(ctx, g, nil); err != nil {
			fmt.Println(err)
			return
		}
	}
	greetAll := func(name string) error {
		for _, g := range greeters {
			rec, _ := records.New("greet", name+" via "+g.ID)
			if _, err := client.Send(ctx, g, rec); err != nil {
				return err
			}
		}
		return nil
	}
	// read reads n outputs from pos on, moving pos past each.
	read := func(pos actor.Positions, n int) ([]string, error) {
		recs, err := client.SubscribeKind(ctx, "greeter", actor.FromPositions(pos))
		if err != nil {
			return nil, err
		}
		var texts []string
		for rec, err := range recs {
			if err != nil {
				return nil, err
			}
			var text string
			_ = rec.Decode(&text)
			texts = append(texts, text)
			pos.Seen(rec.Stream, rec.Seq) // the record's position in its stream
			if len(texts) == n {
				break
			}
		}
		slices.Sort(texts) // streams interleave; each effector's outputs stay in order
		return texts, nil
	}

	// Start at the end of every outbox stream, with a vector naming each.
	pos, err := client.OutboxPositions(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("outbox streams:", len(pos))
	if err := greetAll("ann"); err != nil {
		fmt.Println(err)
		return
	}
	texts, err := read(pos, len(greeters))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(texts)
	kept := pos.String() // e.g. EA_OUT_0_OF_3:3,EA_OUT_1_OF_3:2,EA_OUT_2_OF_3:1

	// Stopped; more outputs are emitted meanwhile.
	if err := greetAll("bob"); err != nil {
		fmt.Println(err)
		return
	}
	resumeAt, err := actor.ParsePositions(kept)
	if err != nil {
		fmt.Println(err)
		return
	}
	texts, err = read(resumeAt, len(greeters))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(texts)

	// A vector of another layout is refused.
	_, err = client.SubscribeKind(ctx, "greeter", actor.FromPositions(actor.Positions{"EA_OUT": 1}))
	fmt.Println(errors.Is(err, actor.ErrInvalid))
	// Output:
	// outbox streams: 3
	// [hello, ann via g1 hello, ann via g2 hello, ann via g3 hello, ann via g4]
	// [hello, bob via g1 hello, bob via g2 hello, bob via g3 hello, bob via g4]
	// true
}
