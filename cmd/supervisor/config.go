package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
)

// config is the supervisor's configuration, read from flags and the
// environment.
type config struct {
	NATS           string
	Prefix         string
	Metrics        string // empty: no metrics server
	LogLevel       slog.Level
	LogFormat      string // "text" or "json"
	ConnectTimeout time.Duration
}

// setting is one flag, its environment variable and its default; its value
// is kept as text and checked after parsing, so a bad value from a flag or
// from the environment gets one clear message.
type setting struct {
	name  string
	arg   string
	def   string
	usage string
	check func(cfg *config, v string) (want string)

	value string
	from  string // "", "flag" or "env"
}

// env is the setting's environment variable: EA_<FLAG>.
func (s *setting) env() string {
	return "EA_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

func (s *setting) String() string {
	if s == nil {
		return ""
	}
	return s.value
}

func (s *setting) Set(v string) error { s.value, s.from = v, "flag"; return nil }

// DefaultNATS is where ea-supervisor connects by default: the embedded
// server of an ea-node started with no flags.
const DefaultNATS = "nats://127.0.0.1:4222"

func settings() []*setting {
	return []*setting{
		{name: "nats", arg: "URLS", def: DefaultNATS,
			usage: "NATS server URL(s), comma-separated: the NATS the nodes use (an ea-node with no --nats embeds one on 127.0.0.1:4222)",
			check: func(c *config, v string) string {
				if strings.TrimSpace(v) == "" {
					return "want a NATS URL such as nats://127.0.0.1:4222 (ea-supervisor does not embed a server)"
				}
				c.NATS = strings.TrimSpace(v)
				return ""
			}},
		{name: "prefix", arg: "NAME", def: bus.DefaultPrefix,
			usage: "subject prefix of mailboxes, streams, buckets and the orchestration API (the nodes' --prefix)",
			check: func(c *config, v string) string {
				if _, err := bus.NewNames(v); err != nil || v == "" {
					return "want one subject token: 1-128 characters of A-Z a-z 0-9 _ -"
				}
				c.Prefix = v
				return ""
			}},
		{name: "metrics", arg: "HOST:PORT", def: "127.0.0.1:9465",
			usage: `address of /metrics, /healthz and /readyz; empty or "off" disables them`,
			check: func(c *config, v string) string {
				if v == "" || v == "off" {
					c.Metrics = ""
					return ""
				}
				if !isHostPort(v) {
					return `want host:port, e.g. 127.0.0.1:9465, or "off" (or empty) to disable`
				}
				c.Metrics = v
				return ""
			}},
		{name: "log-level", arg: "LEVEL", def: "info",
			usage: "least severe level logged: debug, info, warn or error",
			check: func(c *config, v string) string {
				switch strings.ToLower(v) {
				case "debug":
					c.LogLevel = slog.LevelDebug
				case "info":
					c.LogLevel = slog.LevelInfo
				case "warn":
					c.LogLevel = slog.LevelWarn
				case "error":
					c.LogLevel = slog.LevelError
				default:
					return "want debug, info, warn or error"
				}
				return ""
			}},
		{name: "log-format", arg: "FORMAT", def: "text",
			usage: "log format on stderr: text or json",
			check: func(c *config, v string) string {
				switch f := strings.ToLower(v); f {
				case "text", "json":
					c.LogFormat = f
					return ""
				}
				return "want text or json"
			}},
		{name: "connect-timeout", arg: "DURATION", def: "60s",
			usage: "how long to keep trying to reach NATS at start (e.g. while ea-node starts)",
			check: func(c *config, v string) string {
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return "want a positive duration such as 60s or 2m"
				}
				c.ConnectTimeout = d
				return ""
			}},
	}
}

func isHostPort(v string) bool {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// usageError is a bad command line or environment value: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseConfig reads the configuration from args and, for settings no flag
// gives, from the environment through getenv (an empty variable counts as
// unset). It returns flag.ErrHelp for -h and a *usageError for bad input.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	fs := flag.NewFlagSet("ea-supervisor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	all := settings()
	for _, s := range all {
		s.value = s.def
		if v := getenv(s.env()); v != "" {
			s.value, s.from = v, "env"
		}
		fs.Var(s, s.name, s.usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err
		}
		return config{}, usageErrorf("%v", err)
	}
	if fs.NArg() > 0 {
		return config{}, usageErrorf("unexpected argument %q: ea-supervisor takes flags only", fs.Arg(0))
	}
	var cfg config
	for _, s := range all {
		if want := s.check(&cfg, s.value); want != "" {
			if s.from == "env" {
				return config{}, usageErrorf("--%s %q (from %s): %s", s.name, s.value, s.env(), want)
			}
			return config{}, usageErrorf("--%s %q: %s", s.name, s.value, want)
		}
	}
	return cfg, nil
}

// usage is the text -h prints.
func usage() string {
	var b strings.Builder
	b.WriteString(`Usage: ea-supervisor [flags]

ea-supervisor runs orchestrations: multi-step processes that publish task
records to worker effectors (hosted by ea-node) and react to the result
records that come back, with their state in the KV bucket <prefix>_orch. It
serves the orchestration API as a NATS micro service:

  <prefix>.orch.start   {"name": "demo", "input": {...}}  -> {"id": "..."}
  <prefix>.orch.status  {"id": "..."}  -> {"id","name","status","step","waiting_for","results","error"}
  <prefix>.orch.input   {"id": "...", "input": {...}}
  <prefix>.orch.cancel  {"id": "..."}

It runs the orchestration "demo" (task-a, then input, then task-b). Several
ea-supervisor processes may run at once; they share the work.

Every flag can be set by its environment variable instead; a flag wins.

Flags:
`)
	for _, s := range settings() {
		head := "  --" + s.name
		if s.arg != "" {
			head += " " + s.arg
		}
		fmt.Fprintf(&b, "%s\n        %s\n        (env %s; default %q)\n", head, s.usage, s.env(), s.def)
	}
	b.WriteString(`  -h, --help
        print this help

Endpoints on --metrics: /metrics (Prometheus), /healthz (200 while running),
/readyz (200 once connected, provisioned and serving orchestrations; else 503).

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 on failure, 2 for
a bad flag or environment value.
`)
	return b.String()
}
