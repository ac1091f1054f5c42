package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/web"
)

// Example runs a node and a gateway on an embedded JetStream server, then,
// as a WebSocket client would, sends a record to an effector, gets its ack
// (the stream sequence it is stored at) and the record the effector emits.
func Example() {
	dir, _ := os.MkdirTemp("", "effectors-web-example")
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
	echo := actor.Kind[int]{
		Name: "echo",
		Logic: func(ctx *actor.Context, n int) (int, error) {
			var v map[string]any
			if err := ctx.Decode(&v); err != nil {
				return n, err
			}
			return n + 1, ctx.Emit("echoed", v)
		},
	}
	node, _ := actor.NewNode(conn, actor.Options{Logger: quiet})
	if err := node.Host(echo); err != nil {
		fmt.Println(err)
		return
	}
	gw, err := web.New(ctx, conn, web.Config{Addr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	addr, err := gw.Listen()
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{}, 2)
	go func() { _ = node.Run(runCtx); stopped <- struct{}{} }()
	go func() { _ = gw.Run(runCtx); stopped <- struct{}{} }()
	defer func() { stop(); <-stopped; <-stopped }()
	if err := node.WaitReady(ctx); err != nil {
		fmt.Println(err)
		return
	}
	ac, _ := actor.NewClient(ctx, conn)
	if _, err := ac.Create(ctx, records.Ref{Kind: "echo", ID: "e1"}, nil); err != nil {
		fmt.Println(err)
		return
	}

	// A client: any WebSocket library in any language does the same.
	ws, _, err := websocket.Dial(ctx, "ws://"+addr.String()+"/ws", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ws.CloseNow()
	frames := []string{
		`{"type":"subscribe","sub":"out","topic":"outbox","effector":"echo/e1"}`,
		`{"type":"send","req":"1","to":"echo/e1","record":{"id":"hello-1","type":"say","payload":{"text":"hi"}}}`,
	}
	for _, f := range frames {
		if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 4 { // welcome, subscribed, ack, record
		var f map[string]any
		if err := wsjson.Read(ctx, ws, &f); err != nil {
			fmt.Println(err)
			return
		}
		switch f["type"] {
		case "ack":
			fmt.Println("ack", f["id"], "stored at seq", f["seq"])
		case "record":
			rec := f["record"].(map[string]any)
			payload, _ := json.Marshal(rec["json"])
			fmt.Println("emitted", rec["type"], string(payload), "caused by", rec["cause"])
		default:
			fmt.Println(f["type"])
		}
	}
	// Output:
	// welcome
	// subscribed
	// ack hello-1 stored at seq 1
	// emitted echoed {"text":"hi"} caused by hello-1
}

// ExampleParseUsers builds a users file line for a token and looks the
// token up: the file holds only the token's SHA-256.
func ExampleParseUsers() {
	const token = "0f6c1c0e5b0a4e8f9d3b2a1c7e6d5f4a" // use: openssl rand -hex 32
	file := "# name role sha256\n" +
		"alice user " + web.HashToken(token) + "\n" +
		"ops admin " + web.HashToken("another-token-for-ops") + "\n"
	users, err := web.ParseUsers([]byte(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	id, ok := users.Lookup(token)
	fmt.Println(id.Name, id.Role, ok, id.Admin())
	_, ok = users.Lookup(web.HashToken(token)) // the hash is no token
	fmt.Println(ok)
	_, err = web.ParseUsers([]byte("alice user " + token + "\n"))
	fmt.Println(err != nil)
	// Output:
	// alice user true false
	// false
	// true
}
