// Command ea-supervisor runs supervisors: orchestrations that publish task
// records to worker effectors and react to their result records, with the
// orchestration API (<prefix>.orch.start, status, input, cancel) as a NATS
// micro service. It connects to the NATS the nodes use (by default the
// embedded server of an ea-node on 127.0.0.1:4222) and runs the example
// orchestration "demo" (see examples/demo).
//
// It is package supervisord's Command with the demo: a supervisor for your
// own orchestrations is the same binary in a few lines,
// supervisord.Main(yourDefinition) (see package supervisord).
//
// Every flag has an environment variable EA_<FLAG>; a flag wins over its
// variable. Run ea-supervisor -h for the list. Metrics, /healthz and /readyz
// are served on --metrics (default 127.0.0.1:9465); the WebSocket gateway and
// the live record view (package web) on --gateway (default 127.0.0.1:9466,
// beyond loopback only with --gateway-users, --gateway-token-file or
// EA_GATEWAY_TOKEN).
//
// SIGINT or SIGTERM stops it gracefully; a second one kills it at once.
// Orchestrations live in KV, not in the process: stopping or killing it
// loses nothing, and results that arrive meanwhile are processed when a
// supervisor runs again. Exit status: 0 after a clean shutdown, 1 on
// failure, 2 for a bad flag or environment value.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/threads"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/supervisord"
)

func main() {
	cmd, err := command()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ea-supervisor:", err)
		os.Exit(1)
	}
	cmd.Main()
}

// command is ea-supervisor: the supervisor command with the demo.
func command() (supervisord.Command, error) {
	def, err := demo.Definition()
	if err != nil {
		return supervisord.Command{}, err
	}
	return supervisord.Command{
		Name:        "ea-supervisor",
		Definitions: []supervisor.Definition{def},
		Agents:      agentOrchestrations,
		About: `ea-supervisor runs orchestrations: multi-step processes that publish task
records to worker effectors (hosted by ea-node) and react to the result
records that come back, with their state in the KV bucket <prefix>_orch. It
serves the orchestration API as a NATS micro service:

  <prefix>.orch.start   {"name": "demo", "input": {...}}  -> {"id": "..."}
  <prefix>.orch.status  {"id": "..."}  -> {"id","name","status","step","waiting_for","results","error"}
  <prefix>.orch.input   {"id": "...", "input": {...}}
  <prefix>.orch.cancel  {"id": "..."}

It runs the orchestration "demo" (task-a, then input, then task-b). Several
ea-supervisor processes may run at once; they share the work.

With a model (--llm-base-url and --llm-model, or EA_LLM_BASE_URL and
EA_LLM_MODEL: any OpenAI-compatible API) it runs "research" too: a model
chooses each next step and the workers are the researcher threads of an
ea-node given a model (examples/threads). --llm-base-url scripted: is the
built-in scripted model: canned answers that start with "[scripted model]"
(make run's default when EA_LLM_BASE_URL is unset).`,
		Banner: hint,
	}, nil
}

// run is the whole of ea-supervisor (see supervisord.Command.Run).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd, err := command()
	if err != nil {
		return err
	}
	return cmd.Run(ctx, args, getenv, stdout, stderr)
}

// hint is what ea-supervisor prints once ready: how to start and watch the
// demo, with the real URL and prefix.
func hint(in supervisord.Info) string {
	p := in.Names.Prefix()
	var b strings.Builder
	b.WriteString(in.Head())
	b.WriteString("\nRun the demo with the ea CLI of this repository (make build makes bin/ea); it\nneeds an ea-node hosting task-a and task-b on the same NATS (make run starts both):\n")
	if in.URL != "" && in.URL != "nats://127.0.0.1:4222" {
		fmt.Fprintf(&b, "  export EA_NATS=%s\n", in.URL)
	}
	if p != bus.DefaultPrefix {
		fmt.Fprintf(&b, "  export EA_PREFIX=%s\n", p)
	}
	b.WriteString("  bin/ea orch start demo '{\"text\":\"hello world\"}' --wait   # its id; WAITING for input, task A's result\n")
	b.WriteString("  bin/ea orch input <ID> '{\"note\":\"from me\"}'              # then COMPLETED\n")
	b.WriteString("  bin/ea orch status <ID>\n")
	b.WriteString("  bin/ea tail process <ID>                                # its story in the log\n")
	b.WriteString("\nOr with the nats CLI (https://github.com/nats-io/natscli):\n")
	fmt.Fprintf(&b, "  export NATS_URL=%s\n", in.URL)
	fmt.Fprintf(&b, "  nats req %s '{\"name\":\"demo\",\"input\":{\"text\":\"hello world\"}}'   # -> {\"id\":\"<ID>\"}\n", supervisor.Subject(p, supervisor.OpStart))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'     # WAITING for input, with task A's result\n", supervisor.Subject(p, supervisor.OpStatus))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\",\"input\":{\"note\":\"from me\"}}'\n", supervisor.Subject(p, supervisor.OpInput))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'     # COMPLETED, with both tasks' results\n", supervisor.Subject(p, supervisor.OpStatus))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'     # or cancel it while it waits\n", supervisor.Subject(p, supervisor.OpCancel))
	fmt.Fprintf(&b, "  nats sub '%s.mbox.supervisor.>'   # watch results arrive; '%s.mbox.*.demo' the tasks\n", p, p)
	b.WriteString("  Try {\"text\":\"hello world\",\"fail_a\":2} (a retry) or \"fail_a\":9 (the alternative path).\n")
	if in.Metrics != "" {
		fmt.Fprintf(&b, "  curl -s http://%s/metrics | grep ea_orch\n", in.Metrics)
	}
	if slices.Contains(in.Orchestrations, threads.Name) {
		b.WriteString("\nThe model-driven orchestration (an ea-node with the same model hosts its researcher threads):\n")
		b.WriteString("  bin/ea orch start research '{\"goal\":\"why is the sky blue?\"}' --wait\n")
		b.WriteString("  bin/ea orch status <ID>    # every decision the model took, and the final answer\n")
	}
	b.WriteString("\n")
	return b.String()
}
