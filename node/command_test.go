package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/greeter"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/node"
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
