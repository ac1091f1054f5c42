// Command ea-node is the effectors worker node: it hosts the example kinds
// (counter and controller, see package kinds) and drives their effectors on
// NATS JetStream. With no --nats it embeds a NATS server with JetStream, so
// it runs with nothing else installed.
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
	"io"

	"github.com/effectors/effectors/internal/cli"
)

func main() { cli.Main("ea-node", run) }

// run is the whole of ea-node: it reads the configuration from args and
// getenv, connects (or embeds NATS), provisions, hosts the example kinds and
// runs until ctx ends, then shuts down gracefully. It prints the usage for
// -h and a hint of what to try once ready to stdout; it logs to stderr. A
// clean shutdown returns nil; a bad flag or environment value a
// *cli.UsageError.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, getenv, stdout, stderr, parseConfig, usage, serve)
}
