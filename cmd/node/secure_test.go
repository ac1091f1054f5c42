package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// rolesEnv is the environment roles.conf reads its users' passwords from.
var rolesEnv = []string{"EA_CLIENT_PASSWORD=client-pw", "EA_NODE_PASSWORD=node-pw", "EA_SUPERVISOR_PASSWORD=supervisor-pw", "EA_ADMIN_PASSWORD=admin-pw"}

// TestSecuredEmbeddedServer runs ea-node with the shipped roles as its
// embedded server's --server-config, connecting as user node with its
// password from EA_PASSWORD; a client with the client role drives a
// counter through it. Listening on every interface with users gives no
// warning; without users it does, loudly.
func TestSecuredEmbeddedServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	roles, err := filepath.Abs(filepath.Join("..", "..", "deploy", "nats", "roles.conf"))
	if err != nil {
		t.Fatal(err)
	}
	listen, metrics := proctest.FreeAddr(t), proctest.FreeAddr(t)
	listen = "0.0.0.0:" + listen[strings.LastIndex(listen, ":")+1:]
	p := startProcess(t, "node", metrics, binary, append([]string{"EA_PASSWORD=node-pw"}, rolesEnv...),
		"--server-config", roles, "--user", "node", "--listen", listen, "--store", t.TempDir(), "--metrics", metrics, "--partitions", "4")
	p.waitReady(t, 60*time.Second)
	if strings.Contains(p.Stderr.String(), "INSECURE") {
		t.Errorf("a warning about a server with users:\n%s", p.Stderr)
	}
	url := "nats://127.0.0.1" + listen[strings.LastIndex(listen, ":"):]

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{URL: url, Options: []nats.Option{nats.UserInfo("client", "client-pw")}, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	if _, err := c.Create(ctx, c1, nil); err != nil {
		t.Fatal(err)
	}
	rec, _ := records.New("inc", nil)
	sent, err := c.Send(ctx, c1, rec)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.StateAt(ctx, c1, sent.Seq)
	var s kinds.CounterState
	if err != nil || doc.Decode(&s) != nil || s.Count != 1 {
		t.Fatalf("state of c1 = %+v, %v; want count 1", s, err)
	}
	// The client role may not write state.
	if err := conn.NATS().Publish("$KV.ea_state.counter.c1", []byte("junk")); err != nil {
		t.Fatal(err)
	}
	if err := conn.NATS().Flush(); err != nil || conn.NATS().LastError() == nil || !strings.Contains(strings.ToLower(conn.NATS().LastError().Error()), "permissions violation") {
		t.Errorf("a client's write to the state bucket: flush %v, last error %v; want a permissions violation", err, conn.NATS().LastError())
	}

	// Without a password, or with a wrong one, ea-node fails at once.
	for name, env := range map[string][]string{"no password": nil, "wrong password": {"EA_PASSWORD=wrong-pw-9"}} {
		start := time.Now()
		q := startProcess(t, "node2", "", binary, env, "--nats", url, "--user", "node", "--metrics", "off")
		code := q.Wait(t, 15*time.Second)
		out := q.Stdout.String() + q.Stderr.String()
		want := map[string]string{"no password": `--user "node" has no password: set EA_PASSWORD or --password-file`, "wrong password": "check the credentials"}[name]
		if code == 0 || !strings.Contains(out, want) || time.Since(start) > 8*time.Second || strings.Contains(out, "wrong-pw-9") {
			t.Errorf("%s: exit %d after %s:\n%s", name, code, time.Since(start).Round(time.Millisecond), out)
		}
	}
}

// TestInsecureListenWarns: an embedded server on every interface without
// users is announced as INSECURE; on loopback it is not.
func TestInsecureListenWarns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	for _, tc := range []struct {
		host string
		warn bool
	}{{"0.0.0.0", true}, {"127.0.0.1", false}} {
		addr := proctest.FreeAddr(t)
		metrics := proctest.FreeAddr(t)
		p := startNode(t, "node", metrics, "--listen", tc.host+addr[strings.LastIndex(addr, ":"):], "--store", t.TempDir(), "--metrics", metrics, "--partitions", "2")
		p.waitReady(t, 60*time.Second)
		if got := strings.Contains(p.Stderr.String(), "INSECURE: the embedded NATS server accepts clients on"); got != tc.warn {
			t.Errorf("--listen %s: warning %v, want %v:\n%s", tc.host, got, tc.warn, p.Stderr)
		}
		_ = p.Signal(syscall.SIGTERM)
		p.Wait(t, 30*time.Second)
	}
}
