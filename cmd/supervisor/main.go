// Command ea-supervisor runs supervisors: orchestrations that publish task
// records to worker effectors and react to their result records, with the
// orchestration API (<prefix>.orch.start, status, input, cancel) as a NATS
// micro service. It connects to the NATS the nodes use (by default the
// embedded server of an ea-node on 127.0.0.1:4222) and runs the example
// orchestration "demo" (see package supervisor).
//
// Every flag has an environment variable EA_<FLAG>; a flag wins over its
// variable. Run ea-supervisor -h for the list. Metrics, /healthz and /readyz
// are served on --metrics (default 127.0.0.1:9465).
//
// SIGINT or SIGTERM stops it gracefully; a second one kills it at once.
// Orchestrations live in KV, not in the process: stopping or killing it
// loses nothing, and results that arrive meanwhile are processed when a
// supervisor runs again. Exit status: 0 after a clean shutdown, 1 on
// failure, 2 for a bad flag or environment value.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitStatus(err, os.Stderr))
}
