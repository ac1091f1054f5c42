// Command ea-node is the effectors worker node with the example kinds: it
// hosts counter and controller (see examples/kinds) and task-a and task-b,
// the workers of ea-supervisor's demo orchestration, and drives their
// effectors on NATS JetStream. With no --nats it embeds a NATS server with
// JetStream, so it runs with nothing else installed.
//
// It is package node's Command with those kinds: a node for your own kinds
// is the same binary in one line, node.Main(yourKind()) (see package node
// and examples/greeter).
//
// Every flag has an environment variable EA_<FLAG>; a flag wins over its
// variable. Run ea-node -h for the list. Metrics, /healthz and /readyz are
// served on --metrics.
//
// SIGINT or SIGTERM stops the node gracefully (see --shutdown-grace); a
// second one kills it at once. Exit status: 0 after a clean shutdown, 1 when
// the node fails, 2 for a bad flag or environment value.
package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/node"
	"github.com/effectors/effectors/records"
)

func main() { command().Main() }

// command is ea-node: the node command hosting the example kinds.
func command() node.Command {
	return node.Command{
		Name:   "ea-node",
		Kinds:  []actor.Definition{kinds.Counter(), kinds.Controller(), kinds.TaskA(), kinds.TaskB()},
		Agents: agentKinds,
		About: `ea-node hosts the example effector kinds (counter, controller, and task-a
and task-b for ea-supervisor's demo) on NATS JetStream. With no --nats it
starts an embedded NATS server with JetStream that stores in --store, so it
needs nothing else installed.

With a model (--llm-base-url and --llm-model, or EA_LLM_BASE_URL and
EA_LLM_MODEL: any OpenAI-compatible API) it hosts the agent kinds too: chat
(a conversation thread), writer (a streamed task), researcher (the worker
threads of ea-supervisor's "research") and, with --tools, assistant (a task
calling your own services as tools). --llm-base-url scripted: is the
built-in scripted model: canned answers that start with "[scripted model]",
to try the agent kinds with no model, no network and no key (make run's
default when EA_LLM_BASE_URL is unset).`,
		Banner: hint,
	}
}

// run is the whole of ea-node (see node.Command.Run).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return command().Run(ctx, args, getenv, stdout, stderr)
}

// writeEAEnv writes the environment the ea CLI needs to reach this NATS and
// prefix, when they are not its defaults.
func writeEAEnv(b *strings.Builder, url, prefix string) {
	if url != "" && url != "nats://127.0.0.1:4222" {
		fmt.Fprintf(b, "  export EA_NATS=%s\n", url)
	}
	if prefix != bus.DefaultPrefix {
		fmt.Fprintf(b, "  export EA_PREFIX=%s\n", prefix)
	}
}

// hint is what ea-node prints once ready: what to try with the example
// kinds, with the real URL and prefix.
func hint(in node.Info) string {
	n := in.Names
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	ctl := records.Ref{Kind: "controller", ID: "ctl"}
	var b strings.Builder
	b.WriteString(in.Head())
	b.WriteString("\nTry it with the ea CLI of this repository (make build makes bin/ea; bin/ea help):\n")
	writeEAEnv(&b, in.URL, n.Prefix())
	b.WriteString("  bin/ea create counter/c1\n")
	b.WriteString("  bin/ea send counter/c1 '{\"by\":2}' --type inc --wait    # stored, applied, the new state\n")
	b.WriteString("  bin/ea tail outbox counter/c1 --follow                   # in another terminal: what c1 emits\n")
	b.WriteString("  bin/ea create controller/ctl\n")
	b.WriteString("  bin/ea send controller/ctl '{\"counter\":\"c1\",\"times\":100}' --type start\n")
	b.WriteString("  bin/ea state counter/c1\n")
	b.WriteString("  bin/ea top --once                                        # records/s, backlog, dead letters\n")
	b.WriteString("\nOr with the nats CLI (https://github.com/nats-io/natscli):\n")
	fmt.Fprintf(&b, "  export NATS_URL=%s\n", in.URL)
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"c1\"}'\n", n.Control("create", c1.Kind))
	fmt.Fprintf(&b, "  nats sub '%s'    # in another terminal: what c1 emits\n", n.Outbox(c1))
	fmt.Fprintf(&b, "  nats pub %s '{\"by\":2}' -H EA-Type:inc -H Content-Type:application/json\n", n.Mailbox(c1))
	fmt.Fprintf(&b, "  nats kv get %s %s    # c1's state document (the value is msgpack)\n", n.StateBucketFor(c1), n.StateKey(c1))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"ctl\"}'\n", n.Control("create", ctl.Kind))
	fmt.Fprintf(&b, "  nats pub %s '{\"counter\":\"c1\",\"times\":100}' -H EA-Type:start -H Content-Type:application/json\n", n.Mailbox(ctl))
	if in.Metrics != "" {
		fmt.Fprintf(&b, "  curl -s http://%s/metrics | grep ea_\n", in.Metrics)
	}
	writeAgentHint(&b, in)
	b.WriteString("\n")
	return b.String()
}

// writeAgentHint writes how to drive the agent kinds, when they are hosted.
func writeAgentHint(b *strings.Builder, in node.Info) {
	if !slices.Contains(in.Kinds, WriterKind) {
		return
	}
	b.WriteString("\nThe agent kinds ask " + in.LLM + ":\n")
	b.WriteString("  bin/ea create writer/w1\n")
	b.WriteString("  bin/ea tail outbox writer/w1 --follow    # in another terminal: task.chunk records, then task.done\n")
	b.WriteString("  bin/ea send writer/w1 '{\"input\":\"write a haiku about queues\"}' --type task --process s1\n")
	b.WriteString("  bin/ea create chat/t1\n")
	b.WriteString("  bin/ea send chat/t1 '{\"text\":\"Hello, I am Ada.\"}' --type message --wait    # one turn: the answer in its state and on its outbox\n")
	if slices.Contains(in.Kinds, AssistantKind) {
		b.WriteString("  bin/ea create assistant/a1\n")
		b.WriteString("  bin/ea send assistant/a1 '{\"input\":\"What is the weather in Paris?\"}' --type task --process s2    # calls your --tools\n")
	}
	b.WriteString("  With ea-supervisor given the same model: bin/ea orch start research '{\"goal\":\"why is the sky blue?\"}' --wait\n")
}
