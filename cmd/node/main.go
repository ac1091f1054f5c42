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
