package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
)

// ExampleNew hosts a remote kind on a node with an embedded JetStream
// server, and serves its logic with a worker on the plain NATS API, as a
// process in any language would (here in Go, for the example): the worker
// gets the record and the state as JSON and answers the new state and a
// record to emit.
func ExampleNew() {
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

	// The worker: any process on NATS. It keeps nothing between requests.
	wc, err := nats.Connect(conn.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wc.Close()
	names := conn.Names()
	_, err = wc.QueueSubscribe(names.Logic("tally"), names.LogicQueue("tally"), func(m *nats.Msg) {
		var req struct {
			Record struct {
				Type    string `json:"type"`
				Payload string `json:"payload"`
			} `json:"record"`
			State struct {
				Words int `json:"words"`
			} `json:"state"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return // no answer: the node times out and retries
		}
		words := req.State.Words + 1
		reply, _ := json.Marshal(map[string]any{
			"state":   map[string]int{"words": words},
			"records": []any{map[string]any{"op": "emit", "type": "heard", "payload": req.Record.Payload}},
		})
		_ = m.Respond(reply)
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The node: a remote kind is an actor.Kind.
	tally, err := remote.New(conn, "tally", remote.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	node, _ := actor.NewNode(conn, actor.Options{Logger: quiet})
	if err := node.Host(tally); err != nil {
		fmt.Println(err)
		return
	}
	nodeCtx, stopNode := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- node.Run(nodeCtx) }()
	defer func() { stopNode(); <-stopped }()
	for !node.Ready() {
		time.Sleep(5 * time.Millisecond)
	}

	client, _ := actor.NewClient(ctx, conn)
	t1 := records.Ref{Kind: "tally", ID: "t1"}
	if _, err := client.Create(ctx, t1, nil); err != nil {
		fmt.Println(err)
		return
	}
	out, _ := client.Subscribe(ctx, t1)
	rec, _ := records.NewJSON("say", "hello")
	sent, err := client.Send(ctx, t1, rec)
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
	doc, _ := client.State(ctx, t1)
	for doc.Seq < sent.Seq { // outputs are published before the state is written
		time.Sleep(5 * time.Millisecond)
		doc, _ = client.State(ctx, t1)
	}
	state, _ := json.Marshal(doc)
	var shown struct {
		State json.RawMessage `json:"state"`
	}
	_ = json.Unmarshal(state, &shown)
	fmt.Println(doc.Status, string(shown.State))
	// Output:
	// heard: hello from tally/t1
	// IDLE {"words":1}
}
