package supervisord_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/supervisord"
	"github.com/effectors/effectors/web"
)

// TestGatewayUsers runs the command with its gateway beyond loopback and a
// users file from EA_GATEWAY_USERS: a user's token is welcomed with its
// identity, the orchestration it starts is its own, another user's token
// cannot see it, and a wrong token is refused.
func TestGatewayUsers(t *testing.T) {
	srv := bustest.NewServer(t)
	b := graph.New[struct{}]()
	b.AddNode("n", func(context.Context, struct{}) (graph.Update[struct{}], error) { return graph.Update[struct{}]{}, nil })
	b.AddEdge(graph.START, "n").AddEdge("n", graph.END)
	def, err := supervisor.Define(supervisor.Spec[struct{}]{Name: "mine", Graph: b})
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("alice user "+web.HashToken("alice-token")+"\nbob user "+web.HashToken("bob-token")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Beyond loopback (all interfaces), which needs the users file; the
	// test reaches it on 127.0.0.1.
	port := strings.TrimPrefix(proctest.FreeAddr(t), "127.0.0.1:")
	ready := make(chan supervisord.Info, 1)
	cmd := supervisord.Command{Name: "users-supervisor", Definitions: []supervisor.Definition{def},
		Banner: func(in supervisord.Info) string { ready <- in; return "" }}
	env := map[string]string{"EA_GATEWAY_USERS": users}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		stopped <- cmd.Run(ctx, []string{"--nats", srv.URL, "--metrics", "off", "--gateway", "0.0.0.0:" + port, "--log-level", "error"},
			func(k string) string { return env[k] }, io.Discard, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case in := <-ready:
		if !strings.HasSuffix(in.Gateway, "#token=<your gateway token>") {
			t.Errorf("gateway URL %q: want the token placeholder", in.Gateway)
		}
	case err := <-stopped:
		t.Fatalf("stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not ready within 30s")
	}
	url := "ws://127.0.0.1:" + port + "/ws"
	dial := func(token string) *websocket.Conn {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ws.CloseNow() })
		return ws
	}
	read := func(ws *websocket.Conn) (map[string]any, error) {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		var f map[string]any
		err := wsjson.Read(rctx, ws, &f)
		return f, err
	}
	call := func(ws *websocket.Conn, v map[string]any) map[string]any {
		t.Helper()
		if err := wsjson.Write(ctx, ws, v); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := read(ws)
			if err != nil {
				t.Fatal(err)
			}
			if f["req"] == v["req"] {
				return f
			}
		}
	}
	alice, bob := dial("alice-token"), dial("bob-token")
	for name, ws := range map[string]*websocket.Conn{"alice": alice, "bob": bob} {
		if w, err := read(ws); err != nil || w["type"] != "welcome" || w["user"] != name || w["role"] != "user" {
			t.Fatalf("%s's welcome: %v %v", name, w, err)
		}
	}
	started := call(alice, map[string]any{"type": "orch.start", "req": "s", "name": "mine"})
	if started["type"] != "result" {
		t.Fatalf("alice starts: %v", started)
	}
	id := started["result"].(map[string]any)["id"]
	if f := call(alice, map[string]any{"type": "orch.status", "req": "st", "id": id}); f["type"] != "result" || f["result"].(map[string]any)["owner"] != "alice" {
		t.Fatalf("alice's status: %v", f)
	}
	if f := call(bob, map[string]any{"type": "orch.status", "req": "st", "id": id}); f["type"] != "error" || f["code"] != web.CodeForbidden {
		t.Fatalf("bob's status of alice's orchestration: %v", f)
	}
	_, err = read(dial("carol-token"))
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != web.CloseUnauthorized {
		t.Fatalf("a token not in the file: %v", err)
	}
}
