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

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/prometheus/client_golang/prometheus"
)

// config is the node's configuration, read from flags and the environment.
type config struct {
	NATS          string // empty: embedded server
	Listen        string
	Store         string
	SyncAlways    bool
	Prefix        string
	Replicas      int
	Metrics       string // empty: no metrics server
	LogLevel      slog.Level
	LogFormat     string // "text" or "json"
	ShutdownGrace time.Duration

	// Placement (see package actor, Options).
	NodeID       string        // empty: random, new at every start
	Heartbeat    time.Duration // how often the node announces itself
	HeartbeatTTL time.Duration // zero: three heartbeats
	IdleTimeout  time.Duration // negative: never passivate

	// explicit holds the names of the settings given by a flag or the
	// environment rather than left at their default.
	explicit map[string]bool
}

// setting is one flag, its environment variable and its default. Its value
// is kept as text and checked after parsing, so that a bad value, from a flag
// or from the environment, gets one clear message.
type setting struct {
	name string // flag name without dashes
	arg  string // placeholder in the usage, e.g. "URLS"; empty for a bool
	def  string
	// defText, when set, is how the usage shows a default that is not a
	// literal value (an empty def that means "derived" or "random").
	defText string
	usage   string
	// check converts the text into cfg, or returns what is allowed.
	check func(cfg *config, v string) (want string)

	value string
	from  string // "", "flag" or "env"
}

// env is the setting's environment variable: EA_<FLAG>, upper case, dashes
// as underscores.
func (s *setting) env() string {
	return "EA_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// String and Set make a setting a flag.Value; IsBoolFlag lets a bool flag
// stand alone (--sync-always).
func (s *setting) String() string {
	if s == nil {
		return ""
	}
	return s.value
}

func (s *setting) Set(v string) error { s.value, s.from = v, "flag"; return nil }

func (s *setting) IsBoolFlag() bool { return s.arg == "" }

// settings returns the node's settings, in the order the usage lists them.
func settings() []*setting {
	return []*setting{
		{name: "nats", arg: "URLS", def: "",
			usage: "NATS server URL(s), comma-separated; empty starts an embedded server",
			check: func(c *config, v string) string { c.NATS = strings.TrimSpace(v); return "" }},
		{name: "listen", arg: "HOST:PORT", def: "127.0.0.1:4222",
			usage: "client address of the embedded server (without --nats)",
			check: func(c *config, v string) string {
				if !isHostPort(v) {
					return "want host:port, e.g. 127.0.0.1:4222 (port 0 picks a free one)"
				}
				c.Listen = v
				return ""
			}},
		{name: "store", arg: "DIR", def: "./data",
			usage: "JetStream store directory of the embedded server (without --nats)",
			check: func(c *config, v string) string {
				if strings.TrimSpace(v) == "" {
					return "want a directory path"
				}
				c.Store = v
				return ""
			}},
		{name: "sync-always", def: "false",
			usage: "make the embedded server fsync every write before acknowledging it (slower; survives power loss)",
			check: func(c *config, v string) string {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return "want true or false"
				}
				c.SyncAlways = b
				return ""
			}},
		{name: "prefix", arg: "NAME", def: bus.DefaultPrefix,
			usage: "subject prefix of mailboxes, streams, buckets and control endpoints",
			check: func(c *config, v string) string {
				if _, err := bus.NewNames(v); err != nil || v == "" {
					return "want one subject token: 1-128 characters of A-Z a-z 0-9 _ -"
				}
				c.Prefix = v
				return ""
			}},
		{name: "replicas", arg: "N", def: "1",
			usage: "replicas of streams and buckets (3 on a cluster)",
			check: func(c *config, v string) string {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 5 {
					return "want a whole number from 1 to 5"
				}
				c.Replicas = n
				return ""
			}},
		{name: "metrics", arg: "HOST:PORT", def: "127.0.0.1:9464",
			usage: `address of /metrics, /healthz and /readyz; empty or "off" disables them`,
			check: func(c *config, v string) string {
				if v == "" || v == "off" {
					c.Metrics = ""
					return ""
				}
				if !isHostPort(v) {
					return `want host:port, e.g. 127.0.0.1:9464, or "off" (or empty) to disable`
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
		{name: "shutdown-grace", arg: "DURATION", def: "10s",
			usage: "on SIGINT or SIGTERM, how long records in hand may finish before their logic is cancelled",
			check: func(c *config, v string) string {
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return "want a positive duration such as 10s or 1m30s"
				}
				c.ShutdownGrace = d
				return ""
			}},
		{name: "node-id", arg: "ID", def: "",
			defText: "random, new at every start",
			usage:   "this node's name in placement (1-128 characters of A-Z a-z 0-9 _ -); a restarted node with a random id is a new member",
			check: func(c *config, v string) string {
				if v == "" {
					c.NodeID = ""
					return ""
				}
				if err := records.ValidateID(v); err != nil {
					return "want 1-128 characters of A-Z a-z 0-9 _ - (or empty for a random id)"
				}
				c.NodeID = v
				return ""
			}},
		{name: "heartbeat", arg: "DURATION", def: "1s",
			usage: "how often the node announces itself to the other nodes",
			check: func(c *config, v string) string {
				d, err := time.ParseDuration(v)
				if err != nil || d < 10*time.Millisecond {
					return "want a duration of at least 10ms, such as 1s or 500ms"
				}
				c.Heartbeat = d
				return ""
			}},
		{name: "heartbeat-ttl", arg: "DURATION", def: "",
			defText: "three heartbeats: 3s with --heartbeat 1s",
			usage:   "how long a node not heard from counts as alive; then the others take over its effectors (failover time). Must exceed --heartbeat",
			check: func(c *config, v string) string {
				if v == "" {
					c.HeartbeatTTL = 0
					return ""
				}
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return "want a positive duration such as 3s, longer than --heartbeat"
				}
				c.HeartbeatTTL = d
				return ""
			}},
		{name: "idle", arg: "DURATION", def: "2m",
			usage: `how long an effector with nothing to do keeps its consumer before it is passivated (the next record activates it); "off" never passivates`,
			check: func(c *config, v string) string {
				if strings.EqualFold(v, "off") {
					c.IdleTimeout = -1
					return ""
				}
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return `want a positive duration such as 2m or 30s, or "off" to never passivate`
				}
				c.IdleTimeout = d
				return ""
			}},
	}
}

// heartbeatTTL is the TTL in effect: --heartbeat-ttl, or three heartbeats.
func (c config) heartbeatTTL() time.Duration {
	if c.HeartbeatTTL > 0 {
		return c.HeartbeatTTL
	}
	return 3 * c.Heartbeat
}

// actorOptions are the node options the configuration sets.
func (c config) actorOptions(log *slog.Logger, reg prometheus.Registerer) actor.Options {
	return actor.Options{
		Logger:        log,
		Registerer:    reg,
		ShutdownGrace: c.ShutdownGrace,
		NodeID:        c.NodeID,
		Heartbeat:     c.Heartbeat,
		HeartbeatTTL:  c.heartbeatTTL(),
		IdleTimeout:   c.IdleTimeout,
	}
}

// defaultText is the default as the usage shows it.
func (s *setting) defaultText() string {
	switch {
	case s.defText != "":
		return s.defText
	case s.def == "":
		return "empty"
	}
	return strconv.Quote(s.def)
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
	fs := flag.NewFlagSet("ea-node", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, usage on -h
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
		return config{}, usageErrorf("unexpected argument %q: ea-node takes flags only (a bool flag takes its value as --flag=false)", fs.Arg(0))
	}
	cfg := config{explicit: map[string]bool{}}
	for _, s := range all {
		if want := s.check(&cfg, s.value); want != "" {
			if s.from == "env" {
				return config{}, usageErrorf("--%s %q (from %s): %s", s.name, s.value, s.env(), want)
			}
			return config{}, usageErrorf("--%s %q: %s", s.name, s.value, want)
		}
		if s.from != "" {
			cfg.explicit[s.name] = true
		}
	}
	if ttl := cfg.heartbeatTTL(); ttl <= cfg.Heartbeat {
		return config{}, usageErrorf("--heartbeat-ttl %s must exceed --heartbeat %s: a node would count as dead between two of its own heartbeats (use about 3 heartbeats)", ttl, cfg.Heartbeat)
	}
	return cfg, nil
}

// usage is the text -h prints.
func usage() string {
	var b strings.Builder
	b.WriteString(`Usage: ea-node [flags]

ea-node hosts the example effector kinds (counter, controller) on NATS
JetStream. With no --nats it starts an embedded NATS server with JetStream
that stores in --store, so it needs nothing else installed.

Every flag can be set by its environment variable instead; a flag wins.

Flags:
`)
	for _, s := range settings() {
		head := "  --" + s.name
		if s.arg != "" {
			head += " " + s.arg
		}
		def := s.defaultText()
		fmt.Fprintf(&b, "%s\n        %s\n        (env %s; default %s)\n", head, s.usage, s.env(), def)
	}
	b.WriteString(`  -h, --help
        print this help

Endpoints on --metrics: /metrics (Prometheus), /healthz (200 while running),
/readyz (200 once connected, provisioned and serving its kinds; else 503).

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 on failure, 2 for
a bad flag or environment value.
`)
	return b.String()
}
