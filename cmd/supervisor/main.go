// Command ea-supervisor runs supervisors: orchestrations that publish task
// records to worker effectors and react to their result records, with the
// orchestration API (<prefix>.orch.start, status, input, cancel) as a NATS
// micro service. It connects to the NATS the nodes use (by default the
// embedded server of an ea-node on 127.0.0.1:4222) and runs the example
// orchestration "demo" (see package supervisor).
//
// Every flag has an environment variable EA_<FLAG>; a flag wins over its
// variable. Run ea-supervisor -h for the list. Metrics, /healthz and /readyz
// are served on --metrics (default 127.0.0.1:9465); the WebSocket gateway and
// the live record view (package web) on --gateway (default 127.0.0.1:9466,
// beyond loopback only with --gateway-token-file or EA_GATEWAY_TOKEN).
//
// SIGINT or SIGTERM stops it gracefully; a second one kills it at once.
// Orchestrations live in KV, not in the process: stopping or killing it
// loses nothing, and results that arrive meanwhile are processed when a
// supervisor runs again. Exit status: 0 after a clean shutdown, 1 on
// failure, 2 for a bad flag or environment value.
package main

import (
	"context"
	"io"

	"github.com/effectors/effectors/internal/cli"
)

func main() { cli.Main("ea-supervisor", run) }

// run is the whole of ea-supervisor: it reads the configuration, connects
// to NATS, provisions, runs the supervisor with the demo orchestration until
// ctx ends. It prints the usage for -h and, once ready, a hint of how to
// start and watch the demo to stdout; it logs to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, getenv, stdout, stderr, parseConfig, usage, serve)
}
