package bus_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/bus"
)

// Connect with no URL starts an embedded nats-server with JetStream; Provision
// then creates the streams and buckets of the wire contract.
func ExampleConnect() {
	dir, err := os.MkdirTemp("", "bus-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.Config{
		Listen:   "127.0.0.1:0", // any free port
		StoreDir: dir,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	if err := conn.Provision(ctx); err != nil {
		log.Fatal(err)
	}
	stream, err := conn.MailboxStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	fmt.Println("embedded:", conn.Server() != nil)
	fmt.Println("mailbox stream:", cfg.Name, cfg.Subjects)
	fmt.Println("stored as:", cfg.SubjectTransform.Destination)
	// Output:
	// embedded: true
	// mailbox stream: EA_MBOX [ea.mbox.*.*]
	// stored as: ea.mbox.{{partition(64,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}
}

// Names derives every subject, stream and bucket name from the prefix.
func ExampleNames() {
	names, err := bus.NewNames("acme")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(names.MailboxStream(), names.OutboxStream(), names.DeadStream(), names.StateBucket(), names.OrchBucket())
	fmt.Println(names.Control("create", "echo"))
	ref, ok := names.RefOf("acme.mbox.echo.42")
	fmt.Println(ref, ok)
	fmt.Println(names.Partition(ref), names.StoredMailbox(ref))
	// Output:
	// ACME_MBOX ACME_OUT ACME_DEAD acme_state acme_orch
	// acme.ctl.create.echo
	// echo/42 true
	// 6 acme.mbox.6.echo.42
}

// Retention bounds the record log and the dead letters; provisioning applies
// it to the streams, existing ones included. Zero fields keep what the
// streams have. (A byte limit reserves that much of the server's store:
// JetStream refuses a stream whose limit does not fit in what is left.)
func ExampleRetention() {
	dir, err := os.MkdirTemp("", "bus-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.Config{
		Listen: "127.0.0.1:0", StoreDir: dir, Logger: slog.New(slog.DiscardHandler),
		Retention: bus.Retention{LogMaxAge: 30 * 24 * time.Hour, LogMaxBytes: 1 << 30, DeadMaxAge: 90 * 24 * time.Hour},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Provision(ctx); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"EA_MBOX", "EA_OUT", "EA_DEAD"} {
		s, err := conn.JetStream().Stream(ctx, name)
		if err != nil {
			log.Fatal(err)
		}
		c := s.CachedInfo().Config
		fmt.Println(name, c.MaxAge, c.MaxBytes)
	}
	// Output:
	// EA_MBOX 720h0m0s 1073741824
	// EA_OUT 720h0m0s 1073741824
	// EA_DEAD 2160h0m0s -1
}

// A Publisher publishes to a stream and waits for the server's
// acknowledgement; a message id seen before comes back as a duplicate of
// the first, at the same sequence.
func ExamplePublisher() {
	dir, err := os.MkdirTemp("", "bus-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Provision(ctx); err != nil {
		log.Fatal(err)
	}

	pub, err := bus.NewPublisher(conn.NATS(), 0)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msg := nats.NewMsg("ea.mbox.counter.c1")
	msg.Data = []byte(`{"by":2}`)
	msg.Header.Set("Nats-Msg-Id", "first-inc")
	msg.Header.Set("EA-Type", "inc")
	msg.Header.Set("Content-Type", "application/json")
	for range 2 {
		ack, err := pub.PublishMsg(ctx, msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ack.Stream, ack.Sequence, ack.Duplicate)
	}
	// Output:
	// EA_MBOX 1 false
	// EA_MBOX 1 true
}
