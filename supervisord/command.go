package supervisord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/tracing"
	"github.com/effectors/effectors/web"
)

// ErrNoDefinitions is returned by [Command.Run] for a command with no
// orchestration definitions.
var ErrNoDefinitions = errors.New("supervisord: no orchestrations to run: pass at least one supervisor.Definition to supervisord.Main or Command.Definitions, or give Command.Agents a model with --llm-base-url and --llm-model")

// Main runs a supervisor binary for the orchestrations defs, with the
// flags, EA_* variables, health and metrics endpoints and graceful shutdown
// of ea-supervisor, and exits: 0 after a clean shutdown (SIGINT, SIGTERM),
// 1 on failure, 2 for a bad flag or environment value. It is the whole main
// of a user's supervisor:
//
//	func main() {
//		def, err := supervisor.Define(supervisor.Spec[MyState]{...})
//		if err != nil {
//			log.Fatal(err)
//		}
//		supervisord.Main(def)
//	}
//
// The program's name in messages and in -h is the base name of os.Args[0].
// Use [Command] for more control.
func Main(defs ...supervisor.Definition) {
	Command{Definitions: defs}.Main()
}

// Command is a supervisor binary: the orchestrations it runs and what it
// says about itself. The zero value of every field but Definitions is
// usable.
type Command struct {
	// Name is the program's name in messages and in -h; empty: the base
	// name of os.Args[0].
	Name string
	// Definitions are the orchestrations served (at least one).
	Definitions []supervisor.Definition
	// About is what -h says the binary does, between the usage line and the
	// flags; empty: a description of the orchestration API.
	About string
	// Banner is what the binary prints to stdout once it serves; nil:
	// [DefaultBanner]. Return "" to print nothing.
	Banner func(Info) string
	// Configure, when set, adjusts the supervisor options the flags set
	// (logger, registry) before the supervisor is created. It must not
	// block.
	Configure func(*supervisor.Options)
	// Agents, when set, returns orchestrations whose nodes ask a model
	// (supervisor.Spec's Services), built with the services of the --llm-*
	// settings (EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY,
	// EA_LLM_EMBED_MODEL). It is called only when a model is configured:
	// without one the supervisor serves its other orchestrations and logs
	// how to turn these on. See supervisord/llm.go.
	Agents func(*core.Services) ([]supervisor.Definition, error)
}

// Info is what a supervisor binary knows once it serves: what its banner
// shows.
type Info struct {
	Program        string    // the program's name
	URL            string    // the NATS URL, secrets redacted
	Names          bus.Names // subject, stream and bucket names
	Orchestrations []string  // the names of the orchestrations served, sorted
	Metrics        string    // a reachable address of /metrics; empty: none
	// Gateway is the URL of the live record view (the WebSocket gateway at
	// its /ws); empty: the gateway is off.
	Gateway string
}

// Main runs the command with the process's arguments, environment and
// standard streams, and exits (see [Main]).
func (c Command) Main() {
	cli.Main(c.program(), func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
		return c.Run(ctx, args, getenv, stdout, stderr)
	})
}

// Run is the whole of the supervisor binary: it reads the configuration
// from args and, for settings no flag gives, from getenv; connects to NATS,
// provisions, and serves the orchestrations until ctx ends. It prints the
// usage for -h and the banner once ready to stdout, and logs to stderr. A
// clean shutdown returns nil; a bad flag or environment value an error for
// which the exit status is 2 (see [Command.Main]).
func (c Command) Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(c.Definitions) == 0 && c.Agents == nil {
		return ErrNoDefinitions
	}
	if getenv == nil || stdout == nil || stderr == nil {
		return errors.New("supervisord: Command.Run: getenv, stdout and stderr must not be nil")
	}
	program := c.program()
	parse := func(args []string, getenv func(string) string) (config, error) {
		cfg, err := parseConfig(program, args, getenv)
		if err == nil && len(c.Definitions) == 0 && !cfg.LLM.Configured() {
			return cfg, ErrNoDefinitions
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
	return `It runs orchestrations: multi-step processes that publish task records to
worker effectors and react to the result records that come back, with their
state in the KV bucket <prefix>_orch. It serves the orchestration API as a
NATS micro service:

  <prefix>.orch.start   {"name": "...", "input": {...}}  -> {"id": "..."}
  <prefix>.orch.status  {"id": "..."}  -> {"id","name","status","step","waiting_for","results","error"}
  <prefix>.orch.input   {"id": "...", "input": {...}}
  <prefix>.orch.cancel  {"id": "..."}

Several supervisor processes may run at once; they share the work.

`
}

// serve runs the supervisor with its configuration until ctx ends.
func (c Command) serve(ctx context.Context, program string, cfg config, log *slog.Logger, stdout io.Writer) error {
	// A supervisor is not ready while its NATS connection is down, even if
	// its service still runs.
	proc, err := cli.StartProcess(cli.ProcessOptions{
		Program: program, Metrics: cfg.Metrics, Log: log,
		Reason: "connecting to NATS at " + bus.RedactURL(cfg.NATS), RequireConnected: true,
	})
	if err != nil {
		return err
	}
	defer proc.Close()
	state, metrics := proc.State, proc.Metrics
	tracer, flushSpans, err := cli.StartTracing(ctx, program, cfg.OTLPEndpoint, log)
	if err != nil {
		return err
	}
	defer flushSpans()

	conn, err := bus.Connect(ctx, bus.Config{
		URL: cfg.NATS, Prefix: cfg.Prefix, Name: program, Logger: log,
		ConnectTimeout: cfg.ConnectTimeout, Options: cfg.Auth.Options(), Retention: cfg.Retention,
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while connecting to NATS")
			return nil
		}
		return fmt.Errorf("%w (are the nodes running? start them, or point --nats at their NATS)", err)
	}
	defer cli.CloseConn(conn, log)
	if err := proc.Registry.Register(cli.NewConnStateCollector(conn, bus.ConnStates())); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	// A connection NATS closes for good (it will not reconnect) stops
	// everything, and the process exits non-zero so that it is restarted.
	ctx, stopWatch := cli.UntilLost(ctx, conn)
	defer stopWatch()
	state.Set("provisioning streams and buckets")
	if err := conn.Provision(ctx); err != nil {
		if ctx.Err() != nil {
			return conn.Err()
		}
		return err
	}

	opts := supervisor.Options{Logger: log, Registerer: proc.Registry, Tracer: tracer}
	if c.Configure != nil {
		c.Configure(&opts)
	}
	sup, err := supervisor.New(conn, opts)
	if err != nil {
		return err
	}
	agents, err := c.agents(cfg, log, proc.Registry)
	if err != nil {
		return err
	}
	if err := sup.Register(append(slices.Clone(c.Definitions), agents...)...); err != nil {
		return err
	}
	run, gateway, err := withGateway(ctx, cfg, conn, log, proc, tracer, sup.Run)
	if err != nil {
		return err
	}
	state.Attach(conn, sup, "starting the orchestration service")

	banner := c.Banner
	if banner == nil {
		banner = DefaultBanner
	}
	err = cli.RunAnnounced(ctx, run, sup.Ready, func() {
		in := Info{Program: program, URL: conn.ClientURL(), Names: conn.Names(), Orchestrations: sup.Names(), Gateway: gateway}
		slices.Sort(in.Orchestrations)
		if metrics != nil {
			in.Metrics = cli.Reachable(metrics.Addr())
		}
		if text := banner(in); text != "" {
			_, _ = io.WriteString(stdout, text)
		}
	})
	state.Set(cli.ShuttingDown)
	if lost := conn.Err(); lost != nil {
		return lost
	}
	return err
}

// DefaultBanner is what a supervisor binary prints once ready unless its
// [Command] says otherwise: its orchestrations, NATS and metrics addresses,
// and the API subjects.
func DefaultBanner(in Info) string {
	p := in.Names.Prefix()
	var b strings.Builder
	b.WriteString(in.Head())
	b.WriteString("\nDrive it with the nats CLI (https://github.com/nats-io/natscli):\n")
	fmt.Fprintf(&b, "  export NATS_URL=%s\n", in.URL)
	name := "<NAME>"
	if len(in.Orchestrations) > 0 {
		name = in.Orchestrations[0]
	}
	fmt.Fprintf(&b, "  nats req %s '{\"name\":\"%s\",\"input\":{}}'   # -> {\"id\":\"<ID>\"}\n", supervisor.Subject(p, supervisor.OpStart), name)
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'\n", supervisor.Subject(p, supervisor.OpStatus))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\",\"input\":{}}'\n", supervisor.Subject(p, supervisor.OpInput))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'\n", supervisor.Subject(p, supervisor.OpCancel))
	b.WriteString("\n")
	return b.String()
}

// Head writes the first lines of a banner: the program, its orchestrations
// and prefix, where NATS and the metrics are. A [Command.Banner] of its own
// starts with it.
func (in Info) Head() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s is ready: orchestrations %s, prefix %q\n", in.Program, strings.Join(in.Orchestrations, ", "), in.Names.Prefix())
	fmt.Fprintf(&b, "  version  %s\n", cli.Version())
	fmt.Fprintf(&b, "  NATS     %s\n", in.URL)
	if in.Metrics != "" {
		fmt.Fprintf(&b, "  metrics  http://%s/metrics (and /healthz, /readyz)\n", in.Metrics)
	}
	if in.Gateway != "" {
		fmt.Fprintf(&b, "  gateway  %s  (the console: records, effectors, orchestrations, dead letters, nodes; WebSocket at /ws, docs/gateway.md)\n", in.Gateway)
	}
	return b.String()
}

// config is a supervisor binary's configuration, read from flags and the
// environment.
type config struct {
	NATS           string
	Auth           cli.Auth
	Prefix         string
	Metrics        string // empty: no metrics server
	LogLevel       slog.Level
	LogFormat      string // "text" or "json"
	ConnectTimeout time.Duration
	Retention      bus.Retention // of the record log and dead letters
	// Gateway is the address of the WebSocket gateway and live view (empty:
	// off); GatewayToken its bearer token (from --gateway-token-file or
	// EA_GATEWAY_TOKEN); GatewayUsers the path of its users file
	// (--gateway-users); GatewayOrigins other origins allowed,
	// comma-separated.
	Gateway        string
	GatewayToken   string
	GatewayUsers   string
	GatewayOrigins string
	// LLM is the model of model-driven orchestrations (supervisord/llm.go).
	LLM cli.LLM
	// OTLPEndpoint is where trace spans go (--otlp-endpoint, package
	// tracing): the supervisor's steps and the gateway's sends.
	OTLPEndpoint string
}

// Logging is how the supervisor logs; see cli.Run.
func (c config) Logging() (slog.Level, string) { return c.LogLevel, c.LogFormat }

// defaultNATS is where a supervisor binary connects by default: the
// embedded server of an ea-node started with no flags.
const defaultNATS = "nats://127.0.0.1:4222"

// settings returns the supervisor's settings, in the order the usage lists
// them.
func settings() []*cli.Setting[config] {
	nats := &cli.Setting[config]{Name: "nats", Arg: "URLS", Def: defaultNATS,
		Usage: "NATS server URL(s), comma-separated: the NATS the nodes use (a node with no --nats embeds one on 127.0.0.1:4222)",
		Check: func(c *config, v string) string {
			if strings.TrimSpace(v) == "" {
				return "want a NATS URL such as nats://127.0.0.1:4222 (a supervisor does not embed a server)"
			}
			c.NATS = strings.TrimSpace(v)
			return ""
		}}
	out := append([]*cli.Setting[config]{nats}, cli.AuthSettings(func(c *config) *cli.Auth { return &c.Auth })...)
	return append(append(out,
		&cli.Setting[config]{Name: "prefix", Arg: "NAME", Def: bus.DefaultPrefix,
			Usage: "subject prefix of mailboxes, streams, buckets and the orchestration API (the nodes' --prefix)",
			Check: func(c *config, v string) string { return cli.Prefix(v, &c.Prefix) }},
		cli.MetricsSetting("127.0.0.1:9465", func(c *config) *string { return &c.Metrics }),
		cli.LogLevelSetting(func(c *config) *slog.Level { return &c.LogLevel }),
		cli.LogFormatSetting(func(c *config) *string { return &c.LogFormat }),
		cli.OTLPSetting(func(c *config) *string { return &c.OTLPEndpoint }),
		&cli.Setting[config]{Name: "connect-timeout", Arg: "DURATION", Def: "60s",
			Usage: "how long to keep trying to reach NATS at start (e.g. while the nodes start)",
			Check: func(c *config, v string) string {
				return cli.PositiveDuration(v, &c.ConnectTimeout, "want a positive duration such as 60s or 2m")
			}},
		&cli.Setting[config]{Name: "gateway", Arg: "HOST:PORT", Def: web.DefaultAddr,
			Usage: `address of the WebSocket gateway (/ws) and the live record view (/); "off" (or empty) disables it; an address beyond loopback needs --gateway-users or a token`,
			Check: func(c *config, v string) string {
				v = strings.TrimSpace(v)
				if v == "" || v == "off" {
					c.Gateway = ""
					return ""
				}
				if _, _, err := net.SplitHostPort(v); err != nil {
					return `want host:port, e.g. ` + web.DefaultAddr + `, or "off" to disable`
				}
				c.Gateway = v
				return ""
			}},
		&cli.Setting[config]{Name: "gateway-users", Arg: "FILE", Def: "",
			Usage: `users file of the gateway: one line per token, "<name> <user|admin> sha256:<hex of the token's SHA-256>"; records, effectors and orchestrations get EA-Owner <name>, and a user sees only its own; re-read when it changes (docs/gateway.md)`,
			Check: func(c *config, v string) string {
				if v == "" {
					return ""
				}
				if _, err := web.LoadUsers(v); err != nil {
					return strings.TrimPrefix(err.Error(), web.ErrInvalid.Error()+": ")
				}
				c.GatewayUsers = v
				return ""
			}},
		&cli.Setting[config]{Name: "gateway-token-file", Arg: "FILE", Def: "",
			Usage: "file holding a shared bearer token of the gateway, the identity admin (or set EA_GATEWAY_TOKEN); clients send Authorization: Bearer <token> or an auth frame",
			Check: func(c *config, v string) string {
				if v == "" {
					return ""
				}
				b, err := os.ReadFile(v)
				if err != nil {
					return "want a readable file holding the token: " + err.Error()
				}
				tok := strings.TrimRight(string(b), "\r\n")
				if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
					return "want a file holding one token (no spaces; a trailing newline is removed)"
				}
				c.GatewayToken = tok
				return ""
			}},
		&cli.Setting[config]{Name: "gateway-origins", Arg: "HOSTS", Def: "",
			Usage: "comma-separated host patterns (e.g. app.example.com,*.example.com) of other web origins allowed to open the gateway; its own is always allowed",
			Check: func(c *config, v string) string {
				var keep []string
				for _, o := range strings.Split(v, ",") {
					if o = strings.TrimSpace(o); o == "" {
						continue
					}
					if strings.Contains(o, "/") {
						return "want host patterns without scheme or path, e.g. app.example.com,*.example.com"
					}
					keep = append(keep, o)
				}
				c.GatewayOrigins = strings.Join(keep, ",")
				return ""
			}},
	), append(cli.RetentionSettings(func(c *config) *bus.Retention { return &c.Retention }), llmSettings()...)...)
}

// gatewayConfig is the gateway's configuration (Addr empty when off).
func (c config) gatewayConfig() web.Config {
	g := web.Config{Addr: c.Gateway, Token: c.GatewayToken, UsersFile: c.GatewayUsers}
	if c.GatewayOrigins != "" {
		g.Origins = strings.Split(c.GatewayOrigins, ",")
	}
	return g
}

// withGateway binds the gateway when cfg enables it and returns run, which
// runs the gateway beside next until ctx ends (either failing stops both),
// and the live view's URL (with a placeholder for the token, which the
// page reads from the fragment: browsers do not send it to servers). Off,
// it returns next as it is.
func withGateway(ctx context.Context, cfg config, conn *bus.Conn, log *slog.Logger, proc *cli.Process, tracer *tracing.Tracer, next func(context.Context) error) (func(context.Context) error, string, error) {
	if cfg.Gateway == "" {
		return next, "", nil
	}
	gc := cfg.gatewayConfig()
	gc.Logger, gc.Registerer, gc.Tracer = log, proc.Registry, tracer
	gw, err := web.New(ctx, conn, gc)
	if err != nil {
		return nil, "", err
	}
	addr, err := gw.Listen()
	if err != nil {
		gw.Close()
		return nil, "", fmt.Errorf("%w (choose another --gateway address, or --gateway off)", err)
	}
	url := "http://" + cli.Reachable(addr.String()) + "/"
	if gc.Token != "" || gc.UsersFile != "" {
		url += "#token=<your gateway token>" // never printed
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		gerr := make(chan error, 1)
		go func() {
			err := gw.Run(ctx)
			if err != nil {
				cancel()
			}
			gerr <- err
		}()
		err := next(ctx)
		cancel()
		return errors.Join(err, <-gerr)
	}, url, nil
}

// parseConfig reads the configuration of program from args and, for
// settings no flag gives, from the environment through getenv (an empty
// variable counts as unset). It returns flag.ErrHelp for -h and a
// *cli.UsageError for bad input.
func parseConfig(program string, args []string, getenv func(string) string) (config, error) {
	var cfg config
	if _, err := cli.Parse(program, settings(), args, getenv, &cfg); err != nil {
		return config{}, err
	}
	if err := cfg.Auth.Load(getenv); err != nil {
		return config{}, err
	}
	if err := cfg.loadLLM(getenv); err != nil {
		return config{}, err
	}
	if cfg.GatewayToken == "" {
		cfg.GatewayToken = strings.TrimSpace(getenv("EA_GATEWAY_TOKEN"))
	}
	if cfg.Gateway != "" {
		if err := cfg.gatewayConfig().Validate(); err != nil {
			return config{}, cli.Usagef("--gateway %q: %v", cfg.Gateway, strings.TrimPrefix(err.Error(), web.ErrInvalid.Error()+": "))
		}
	}
	return cfg, nil
}

// usage is the text -h prints: the usage line of program, about, then the
// flags.
func usage(program, about string) string {
	return cli.Usage("Usage: "+program+" [flags]\n\n"+about, settings(), "serving orchestrations")
}
