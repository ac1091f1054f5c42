// Command scale runs the scale scenarios of package scale, and is also the
// NATS server and the node processes they start.
//
//	scale server -store DIR                  a NATS server (prints "URL <url>")
//	scale node -url URL -id ID [-idle 1h]    a node hosting the counter kind (prints "READY")
//	scale active  [-n 10000] [-small 100] [-records 100000] [-samples 1000]
//	scale million [-n 1000000] [-samples 1000] [-bulk 10000]
//	scale failover [-n 3000] [-nodes 3]
//	scale raw [-sizes 100,10000] [-records 100000]   nats.go consumers alone, no runtime
//
// Scenario reports go to stdout, the children's logs to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/effectors/effectors/bench/scale"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: scale server|node|active|million|failover [flags]")
	}
	if handled, err := scale.Child(ctx, args, stdout, stderr); handled {
		return err
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory for the server's store (default: a temporary one)")
	nodePprof := fs.String("node-pprof", "", "host:port: node n<i> serves net/http/pprof on port+i-1")
	var nodeEnv, nodeArgs listFlag
	fs.Var(&nodeEnv, "node-env", "KEY=VALUE added to the nodes' environment (repeatable), e.g. GOMEMLIMIT=150MiB")
	fs.Var(&nodeArgs, "node-arg", "FLAG=VALUE passed to every node as -FLAG=VALUE (repeatable), e.g. memory-limit=off, record-store=false")
	serverPprof := fs.String("server-pprof", "", "make the NATS server process serve net/http/pprof on this address")
	var runScenario func(env scale.Env) error
	switch args[0] {
	case "active":
		var c scale.ActiveConfig
		fs.IntVar(&c.Effectors, "n", 10_000, "active effectors")
		fs.IntVar(&c.Small, "small", 100, "the smaller population to compare throughput with")
		fs.IntVar(&c.Records, "records", 100_000, "records per throughput run")
		fs.IntVar(&c.Samples, "samples", 1000, "passive effectors to measure activation latency on")
		fs.DurationVar(&c.Settle, "settle", 5*time.Second, "idle time before reading idle RSS")
		fs.IntVar(&c.Batch, "batch", 0, "the counter kind's MaxBatch (0: its default; 1: one record per state write)")
		runScenario = func(env scale.Env) error { return scale.Active(ctx, env, c) }
	case "million":
		var c scale.MillionConfig
		fs.IntVar(&c.Effectors, "n", 1_000_000, "state documents")
		fs.IntVar(&c.Window, "window", 4096, "document writes in flight")
		fs.IntVar(&c.Samples, "samples", 1000, "passive effectors to measure activation latency on")
		fs.IntVar(&c.Bulk, "bulk", 10_000, "random passive effectors to activate at once")
		runScenario = func(env scale.Env) error { return scale.Million(ctx, env, c) }
	case "failover":
		var c scale.FailoverConfig
		fs.IntVar(&c.Effectors, "n", 3000, "active effectors")
		fs.IntVar(&c.Nodes, "nodes", 3, "node processes")
		runScenario = func(env scale.Env) error { return scale.Failover(ctx, env, c) }
	case "raw":
		var c scale.RawConfig
		sizes := fs.String("sizes", "100,10000", "comma-separated consumer counts")
		fs.IntVar(&c.Records, "records", 100_000, "records per run")
		fs.IntVar(&c.Streams, "streams", 0, "spread the consumers over this many streams of their own (0: the records stream)")
		runScenario = func(env scale.Env) error {
			for f := range strings.SplitSeq(*sizes, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return fmt.Errorf("-sizes %q: %w", *sizes, err)
				}
				c.Sizes = append(c.Sizes, n)
			}
			return scale.Raw(ctx, env, c)
		}
	default:
		return fmt.Errorf("unknown command %q: want server, node, active, million, failover or raw", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "scale-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(*dir) }()
	}
	env := scale.Env{Bin: bin, Dir: *dir, Log: stderr, Out: stdout}
	env.NodeEnv = nodeEnv
	for _, a := range nodeArgs {
		env.NodeArgs = append(env.NodeArgs, "-"+a)
	}
	if *serverPprof != "" {
		env.ServerArgs = []string{"-pprof", *serverPprof}
	}
	if *nodePprof != "" {
		env.NodePprof = *nodePprof
	}
	return runScenario(env)
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

func (l *listFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*l = append(*l, v)
	return nil
}
