package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
	"github.com/effectors/effectors/store"
)

// ErrNoKinds is returned by [Command.Run] for a command with no kinds to
// host.
var ErrNoKinds = errors.New("node: no kinds to host: pass at least one actor.Kind to node.Main or Command.Kinds, name remote kinds with --remote-kinds, or give Command.Agents a model with --llm-base-url and --llm-model")

// Main runs a node binary that hosts kinds, with the flags, EA_*
// variables, health and metrics endpoints and graceful shutdown of ea-node,
// and exits: 0 after a clean shutdown (SIGINT, SIGTERM), 1 on failure, 2 for
// a bad flag or environment value. It is the whole main of a user's node:
//
//	func main() { node.Main(greeter.Kind(), billing.Kind()) }
//
// The program's name in messages and in -h is the base name of os.Args[0].
// Use [Command] for more control.
func Main(kinds ...actor.Definition) {
	Command{Kinds: kinds}.Main()
}

// Command is a node binary: the kinds it hosts and what it says about
// itself. The zero value of every field but Kinds is usable.
type Command struct {
	// Name is the program's name in messages and in -h; empty: the base
	// name of os.Args[0].
	Name string
	// Kinds are the kinds the node hosts (at least one, unless
	// --remote-kinds names some).
	Kinds []actor.Definition
	// About is what -h says the binary does, between the usage line and the
	// flags; empty: a sentence naming the kinds.
	About string
	// Banner is what the binary prints to stdout once it serves its kinds;
	// nil: [DefaultBanner]. Return "" to print nothing.
	Banner func(Info) string
	// Configure, when set, adjusts the actor options the flags set (logger,
	// registry, placement, reply subjects) before the node is created, e.g.
	// to add services. It must not block.
	Configure func(*actor.Options)
	// Agents, when set, returns kinds that ask a model (core.Wrap, task.Kind,
	// conversation.Kind…), built with the services of the --llm-* settings
	// (EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY, EA_LLM_EMBED_MODEL)
	// and the --tools services. It is called once connected, and only when
	// a model is configured: without one the node hosts its other kinds and
	// logs how to turn the agent kinds on. See node/llm.go.
	Agents func(Agents) ([]actor.Definition, error)
	// Setup, when set, is called once the node hosts its kinds and before it
	// runs, e.g. to start something beside it that needs conn. It must not
	// block; an error stops the binary with that error.
	Setup func(ctx context.Context, conn *bus.Conn, n *actor.Node) error

	// process is set by Main: the command owns its process, and sets the
	// Go runtime's memory limit (--memory-limit) and returns memory after
	// bursts, settings of the whole process that Run called inside another
	// program (a test) leaves alone.
	process bool
}

// Info is what a node binary knows once it serves its kinds: what its
// banner shows.
type Info struct {
	Program  string    // the program's name
	URL      string    // the NATS URL clients use (the embedded server's, if any)
	Embedded bool      // the node runs an embedded NATS server
	Store    string    // the embedded server's store directory
	Names    bus.Names // subject, stream and bucket names
	Kinds    []string  // the kinds hosted, sorted
	Metrics  string    // a reachable address of /metrics; empty: none
	// Auth is how the node authenticates to NATS ("none", "user node",
	// ...; see the --user, --creds, --nkey settings), never a secret.
	Auth string
	// LLM is the model the agent kinds ask ("llama3.2 at
	// http://localhost:11434/v1"); empty when no agent kind is hosted.
	LLM string
}

// Main runs the command with the process's arguments, environment and
// standard streams, and exits (see [Main]). Main, owning the process, also
// sets the Go runtime's soft memory limit from --memory-limit (unless
// GOMEMLIMIT is set) and returns the memory a burst of work left behind once
// the node is quiet ([cli.ReleaseWhenQuiet]); [Command.Run] does neither.
func (c Command) Main() {
	program := c.program()
	c.process = true
	cli.Main(program, func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
		return c.Run(ctx, args, getenv, stdout, stderr)
	})
}

// Run is the whole of the node binary: it reads the configuration from args
// and, for settings no flag gives, from getenv; connects (or embeds NATS),
// provisions, hosts the kinds and runs until ctx ends, then shuts down
// gracefully. It prints the usage for -h and the banner once ready to
// stdout, and logs to stderr. A clean shutdown returns nil; a bad flag or
// environment value an error for which the exit status is 2 (see
// [Command.Main]). It leaves the process's memory alone: only Main
// applies --memory-limit.
func (c Command) Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if getenv == nil || stdout == nil || stderr == nil {
		return errors.New("node: Command.Run: getenv, stdout and stderr must not be nil")
	}
	program := c.program()
	parse := func(args []string, getenv func(string) string) (config, error) {
		cfg, err := parseConfig(program, args, getenv)
		if err == nil && len(c.Kinds) == 0 && len(cfg.RemoteKinds) == 0 && (c.Agents == nil || !cfg.LLM.Configured()) {
			return cfg, ErrNoKinds
		}
		return cfg, err
	}
	return cli.Run(ctx, args, getenv, stdout, stderr, parse, func() string { return usage(program, c.about()) },
		func(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
			return c.serve(ctx, program, cfg, log, stdout)
		})
}

func (c Command) program() string {
	if c.Name != "" {
		return c.Name
	}
	return filepath.Base(os.Args[0])
}

func (c Command) about() string {
	if c.About != "" {
		return strings.TrimRight(c.About, "\n") + "\n\n"
	}
	return "It hosts effector kinds on NATS JetStream. With no --nats it starts an\n" +
		"embedded NATS server with JetStream that stores in --store, so it needs\n" +
		"nothing else installed.\n\n"
}

// serve runs the node with its configuration until ctx ends.
func (c Command) serve(ctx context.Context, program string, cfg config, log *slog.Logger, stdout io.Writer) error {
	if c.process {
		defer cli.ApplyMemoryLimit(cfg.MemoryLimit, cfg.GOMEMLIMIT, log)()
		defer cli.ReleaseWhenQuiet(ctx, cli.ReleaseOptions{}, log)()
	}
	if cfg.NATS != "" {
		for _, name := range []string{"listen", "store", "sync-always", "server-config"} {
			if cfg.explicit[name] {
				log.Warn("--" + name + " is ignored with --nats: it configures the embedded server")
			}
		}
	}
	reason := "connecting to NATS"
	if cfg.NATS == "" {
		reason = "starting the embedded NATS server"
		// A restart right after a stop: the node before this one may
		// still hold the store and the ports while its server writes its
		// state to disk. Wait for it, before binding the metrics port.
		awaitStopping(ctx, cfg.Store, log)
	}
	proc, err := cli.StartProcess(cli.ProcessOptions{Program: program, Metrics: cfg.Metrics, Reason: reason, Log: log})
	if err != nil {
		return err
	}
	var marker *stopMarker
	if cfg.NATS == "" {
		// Deferred calls run last first: the stopping marker goes once the
		// metrics port is closed (proc.Close), after the embedded server
		// released the store and its port (cli.CloseConn below).
		marker = &stopMarker{dir: cfg.Store, log: log}
		defer marker.unmark()
	}
	defer proc.Close()
	state, metrics := proc.State, proc.Metrics
	tracer, flushSpans, err := cli.StartTracing(ctx, program, cfg.OTLPEndpoint, log)
	if err != nil {
		return err
	}
	defer flushSpans()

	log.Debug("connecting to NATS", "url", bus.RedactURL(cfg.NATS), "auth", cfg.Auth.Method())
	conn, err := bus.Connect(ctx, bus.Config{
		URL:        cfg.NATS,
		Listen:     cfg.Listen,
		StoreDir:   cfg.Store,
		SyncAlways: cfg.SyncAlways,
		Prefix:     cfg.Prefix,
		Partitions: cfg.Partitions,
		Groups:     cfg.StreamGroups,
		Name:       program,
		Replicas:   cfg.Replicas,
		Retention:  cfg.Retention,
		Logger:     log,
		Options:    cfg.Auth.Options(),
		// The embedded server's users and permissions.
		ServerConfigFile: cfg.ServerConfig,
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while connecting to NATS")
			return nil
		}
		return err
	}
	defer cli.CloseConn(conn, log)
	if marker != nil {
		// From the signal to stop on (or serve's return, whichever comes
		// first, before CloseConn), a node started on this store waits for
		// this one (see StoppingFile).
		stopMarking := context.AfterFunc(ctx, marker.mark)
		defer func() {
			stopMarking()
			marker.mark()
		}()
	}
	if err := proc.Registry.Register(cli.NewConnStateCollector(conn, bus.ConnStates())); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	// A connection NATS closes for good (it will not reconnect) stops
	// everything, the record store's indexer included, and the process exits
	// non-zero so that it is restarted.
	ctx, stopWatch := cli.UntilLost(ctx, conn)
	defer stopWatch()

	if cfg.Migrate {
		state.Set("migrating the store to partitioned mailboxes")
		if err := conn.Migrate(ctx); err != nil {
			return err
		}
		if err := conn.MigrateGroups(ctx); err != nil {
			return err
		}
	}
	state.Set("provisioning streams and buckets")
	if err := conn.Provision(ctx); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while provisioning")
			return conn.Err()
		}
		return err
	}

	// The record store: index the log and answer <prefix>.store.* (see docs/store.md).
	if cfg.RecordStore {
		storeSrv, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: log})
		if err != nil {
			return err
		}
		storeCtx, stopStore := context.WithCancel(ctx)
		storeDone := make(chan error, 1)
		go func() {
			err := storeSrv.Run(storeCtx)
			if err != nil {
				log.Error("record store stopped", "err", err)
			}
			storeDone <- err
		}()
		defer func() { stopStore(); <-storeDone }()
	}

	opts := cfg.actorOptions(log, proc.Registry)
	opts.Intercept = tracer.Intercept() // nil with tracing off
	if c.Configure != nil {
		c.Configure(&opts)
	}
	n, err := actor.NewNode(conn, opts)
	if err != nil {
		return err
	}
	kinds := slices.Clone(c.Kinds)
	for _, rk := range cfg.RemoteKinds {
		// Logic served by worker processes (docs/polyglot.md).
		k, err := remote.New(conn, rk.name, remote.Options{Encoding: rk.enc, Timeout: cfg.RemoteTimeout, Registerer: proc.Registry, Logger: log})
		if err != nil {
			return err
		}
		kinds = append(kinds, k)
	}
	agents, err := c.agents(cfg, conn, log, proc.Registry)
	if err != nil {
		return err
	}
	kinds = append(kinds, agents...)
	if err := n.Host(kinds...); err != nil {
		return err
	}
	if c.Setup != nil {
		if err := c.Setup(ctx, conn, n); err != nil {
			return err
		}
	}
	state.Attach(conn, n, "attaching effectors and starting control endpoints")

	banner := c.Banner
	if banner == nil {
		banner = DefaultBanner
	}
	err = cli.RunAnnounced(ctx, n.Run, n.Ready, func() {
		in := info(program, conn, n, metrics, cfg)
		if len(agents) > 0 {
			in.LLM = cfg.LLM.Describe()
		}
		if text := banner(in); text != "" {
			_, _ = io.WriteString(stdout, text)
		}
	})
	state.Set(cli.ShuttingDown)
	if lost := conn.Err(); lost != nil {
		return lost
	}
	if err != nil && ctx.Err() != nil {
		log.Info("stopped before ready", "err", err)
		return nil
	}
	return err
}

// info is what the banner shows.
func info(program string, conn *bus.Conn, n *actor.Node, metrics *cli.MetricsServer, cfg config) Info {
	store := cfg.Store
	in := Info{Program: program, URL: conn.ClientURL(), Names: conn.Names(), Kinds: n.Kinds(), Auth: cfg.Auth.Method()}
	slices.Sort(in.Kinds)
	if srv := conn.Server(); srv != nil {
		in.URL = "nats://" + cli.Reachable(srv.Addr())
		in.Embedded, in.Store = true, store
	}
	if metrics != nil {
		in.Metrics = cli.Reachable(metrics.Addr())
	}
	return in
}

// DefaultBanner is what a node binary prints once ready unless its
// [Command] says otherwise: its kinds, NATS and metrics addresses, and how
// to drive the first kind with the nats CLI.
func DefaultBanner(in Info) string {
	var b strings.Builder
	in.writeHead(&b)
	if len(in.Kinds) > 0 {
		ref := records.Ref{Kind: in.Kinds[0], ID: "x1"}
		n := in.Names
		b.WriteString("\nTry it with the nats CLI (https://github.com/nats-io/natscli):\n")
		fmt.Fprintf(&b, "  export NATS_URL=%s\n", in.URL)
		fmt.Fprintf(&b, "  nats req %s '{\"id\":\"%s\"}'\n", n.Control("create", ref.Kind), ref.ID)
		fmt.Fprintf(&b, "  nats sub '%s'    # in another terminal: what %s emits\n", n.Outbox(ref), ref.ID)
		fmt.Fprintf(&b, "  nats pub %s '{}' -H EA-Type:message -H Content-Type:application/json\n", n.Mailbox(ref))
		fmt.Fprintf(&b, "  nats kv get %s %s    # its state document (the value is msgpack)\n", n.StateBucketFor(ref), n.StateKey(ref))
	}
	b.WriteString("\n")
	return b.String()
}

// Head writes the first lines of a banner: the program, its kinds and
// prefix, where NATS and the metrics are. A [Command.Banner] of its own
// starts with it.
func (in Info) Head() string {
	var b strings.Builder
	in.writeHead(&b)
	return b.String()
}

func (in Info) writeHead(b *strings.Builder) {
	where := "NATS server"
	if in.Embedded {
		where = "embedded NATS server, store " + in.Store
	}
	fmt.Fprintf(b, "\n%s is ready: kinds %s, prefix %q\n", in.Program, strings.Join(in.Kinds, ", "), in.Names.Prefix())
	fmt.Fprintf(b, "  version  %s\n", cli.Version())
	fmt.Fprintf(b, "  NATS     %s (%s)\n", in.URL, where)
	if in.Auth != "" && in.Auth != "none" {
		fmt.Fprintf(b, "  auth     %s (give the nats CLI credentials too: --user, --creds or --nkey)\n", in.Auth)
	}
	if in.Metrics != "" {
		fmt.Fprintf(b, "  metrics  http://%s/metrics (and /healthz, /readyz)\n", in.Metrics)
	}
	if in.LLM != "" {
		fmt.Fprintf(b, "  model    %s\n", in.LLM)
	}
}
