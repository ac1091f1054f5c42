package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/greeter"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/node"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

func TestCommandRunErrors(t *testing.T) {
	env := func(string) string { return "" }
	var out, errOut strings.Builder
	if err := (node.Command{Name: "x"}).Run(context.Background(), nil, env, &out, &errOut); !errors.Is(err, node.ErrNoKinds) {
		t.Errorf("Run with no kinds = %v, want ErrNoKinds", err)
	}
	cmd := node.Command{Name: "greeter-node", Kinds: []actor.Definition{greeter.Kind()}}
	if err := cmd.Run(context.Background(), nil, nil, &out, &errOut); err == nil {
		t.Error("Run with a nil getenv succeeded")
	}
	// A kind defined badly is refused, naming it.
	srv := bustest.NewServer(t)
	bad := node.Command{Name: "bad-node", Kinds: []actor.Definition{actor.Kind[struct{}]{Name: "a.b"}}}
	if err := bad.Run(context.Background(), []string{"--nats", srv.URL, "--metrics", "off", "--record-store=false"}, env, &out, &errOut); err == nil || !strings.Contains(err.Error(), "a.b") {
		t.Errorf("Run with a bad kind = %v, want an error naming a.b", err)
	}
	var ue *cli.UsageError
	if err := cmd.Run(context.Background(), []string{"--bogus"}, env, &out, &errOut); !errors.As(err, &ue) || cli.ExitStatus("greeter-node", err, &errOut) != 2 {
		t.Errorf("Run --bogus = %v, want a usage error (exit 2)", err)
	}
}

func TestCommandHelp(t *testing.T) {
	var out, errOut strings.Builder
	cmd := node.Command{Name: "greeter-node", Kinds: []actor.Definition{greeter.Kind()}}
	if err := cmd.Run(context.Background(), []string{"-h"}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: greeter-node [flags]", "It hosts effector kinds on NATS JetStream", "--nats URLS", "env EA_NATS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	cmd.About = "greeter-node greets."
	if err := cmd.Run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, &errOut); err != nil || !strings.Contains(out.String(), "Usage: greeter-node [flags]\n\ngreeter-node greets.\n\nEvery flag") {
		t.Errorf("--help with About = %v:\n%s", err, out.String())
	}
}

// TestCommandStreamGroups: --stream-groups reaches the layout: the node
// provisions the groups on its embedded server, mapping included, and runs
// the record store (on by default), which indexes records of every group's
// mailbox and outbox streams.
func TestCommandStreamGroups(t *testing.T) {
	env := func(string) string { return "" }
	var out, errOut strings.Builder
	cmd := node.Command{Name: "greeter-node", Kinds: []actor.Definition{greeter.Kind()}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	args := []string{"--listen", addr, "--store", t.TempDir(), "--metrics", "off", "--partitions", "4", "--stream-groups", "2"}

	// Stopped only once ready: an embedded nats-server shut down while it
	// still creates a stream for the node's start leaves that stream's
	// goroutines behind (goleak saw it in 4 runs of 8 under load).
	ready := make(chan struct{})
	cmd.Banner = func(node.Info) string { close(ready); return "" }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.Run(ctx, args, env, &out, &errOut) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	}
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("node with stream groups stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("node with stream groups not ready within 30s: %s", errOut.String())
	}
	defer stop()
	conn, err := bus.Connect(ctx, bus.Config{URL: "nats://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.JetStream().Stream(ctx, "EA_MBOX_1_OF_2"); err != nil {
		t.Errorf("the groups' streams: %v", err)
	}
	if err := conn.Provision(ctx); err != nil { // adopts the layout, probes the mapping
		t.Fatal(err)
	}
	if g := conn.Names().Groups(); g != 2 {
		t.Fatalf("adopted %d groups, want 2", g)
	}
	// The record store indexes records of both groups: each greeter's
	// record (its mailbox) and greeting (its outbox) are found by query.
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := store.NewRemote(conn)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[int]bool{}
	var refs []records.Ref
	for i := 0; len(groups) < 2 || i < 4; i++ {
		if i == 32 {
			t.Fatalf("32 greeters all in group(s) %v", groups)
		}
		ref := records.Ref{Kind: "greeter", ID: fmt.Sprint("g", i)}
		if _, err := c.Create(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
		rec, err := records.New("greet", greeter.Greet{Name: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, ref, rec); err != nil {
			t.Fatal(err)
		}
		groups[conn.Names().GroupOf(ref)] = true
		refs = append(refs, ref)
	}
	for _, ref := range refs {
		var page store.Page
		actortest.Eventually(t, 30*time.Second, ref.String()+"'s record and greeting in the record store", func() bool {
			page, err = sc.Query(ctx, store.Query{Effector: ref})
			return err == nil && len(page.Records) == 2
		})
		mbox, out := page.Records[0], page.Records[1]
		if mbox.Box != store.BoxMailbox || mbox.Type != "greet" || mbox.Stream != conn.Names().MailboxStreamFor(ref) ||
			out.Box != store.BoxOutbox || out.Type != "greeting" || out.Stream != conn.Names().OutboxStreamFor(ref) || out.Effector != ref {
			t.Fatalf("%s in the record store: %+v", ref, page.Records)
		}
		if r, err := sc.Get(ctx, mbox.ID); err != nil || r.Stream != mbox.Stream || r.Seq != mbox.Seq {
			t.Fatalf("get %s by id: %+v %v", mbox.ID, r, err)
		}
	}
}
