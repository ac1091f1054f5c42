package node

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
	"github.com/prometheus/client_golang/prometheus"
)

// config is a node binary's configuration, read from flags and the environment.
type config struct {
	NATS          string // empty: embedded server
	Auth          cli.Auth
	Listen        string
	Store         string
	SyncAlways    bool
	ServerConfig  string // the embedded server's nats-server configuration file
	Prefix        string
	Partitions    int  // mailbox partitions (fixed at provisioning)
	StreamGroups  int  // stream groups (fixed at provisioning; docs/layout.md)
	Migrate       bool // move a store of a previous layout first
	RecordStore   bool // serve the record store (index and query service)
	Replicas      int
	Retention     bus.Retention // of the record log and dead letters
	Metrics       string        // empty: no metrics server
	LogLevel      slog.Level
	LogFormat     string // "text" or "json"
	ShutdownGrace time.Duration
	// MemoryLimit is the Go runtime's soft memory limit in bytes, -1 for
	// none (--memory-limit); GOMEMLIMIT, the process's variable as read at
	// start, wins when set.
	MemoryLimit  int64
	GOMEMLIMIT   string
	OTLPEndpoint string // --otlp-endpoint: where trace spans go (package tracing)

	// Placement (see package actor, Options).
	NodeID       string        // empty: random, new at every start
	Heartbeat    time.Duration // how often the node announces itself
	HeartbeatTTL time.Duration // zero: three heartbeats
	IdleTimeout  time.Duration // negative: never passivate
	// SpreadLeaders is how often stream leaders are checked and spread
	// again (actor.Options.SpreadLeaders); negative: never.
	SpreadLeaders time.Duration

	// ReplySubjects are the subjects besides mailboxes records may be sent
	// and replied to (actor.Options.ReplySubjects): nil for the default,
	// empty for none.
	ReplySubjects []string

	// RemoteKinds are kinds whose logic runs in worker processes (package
	// remote), and RemoteTimeout bounds one request to a worker.
	RemoteKinds   []remoteKind
	RemoteTimeout time.Duration

	// The model agent kinds ask (see node/llm.go), and services of the
	// user's own offered to them as tools (--tools, read at start).
	LLM       cli.LLM
	ToolsFile string
	Tools     core.ToolFile

	// explicit holds the names of the settings given by a flag or the
	// environment rather than left at their default.
	explicit map[string]bool
}

// setting is one flag, its environment variable and its default; see
// cli.Setting, which it becomes. The settings below are written
// {name: "...", ...} on purpose: charts/charts_test.go finds each flag the
// Helm chart sets in this file by that text.
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
	// shared, when set, is a setting every binary has (package cli); it is
	// used as it is, under name.
	shared *cli.Setting[config]
}

// settings returns the node's settings, in the order the usage lists them.
func settings() []*cli.Setting[config] {
	all := []setting{
		{name: "nats", arg: "URLS", def: "",
			usage: "NATS server URL(s), comma-separated; empty starts an embedded server",
			check: func(c *config, v string) string { c.NATS = strings.TrimSpace(v); return "" }},
		{name: "listen", arg: "HOST:PORT", def: "127.0.0.1:4222",
			usage: "client address of the embedded server (without --nats)",
			check: func(c *config, v string) string {
				if !cli.IsHostPort(v) {
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
		{name: "server-config", arg: "FILE", def: "",
			defText: "none: no authentication",
			usage:   "nats-server configuration file of the embedded server (without --nats): users, accounts, permissions, TLS; see deploy/nats for the runtime's roles. The node connects to it with --user, --creds, --nkey or a token like any client",
			check: func(c *config, v string) string {
				c.ServerConfig = strings.TrimSpace(v)
				if c.ServerConfig == "" {
					return ""
				}
				if _, err := os.Stat(c.ServerConfig); err != nil {
					return "want a readable nats-server configuration file: " + err.Error()
				}
				return ""
			}},
		{name: "partitions", arg: "N", def: "",
			usage: fmt.Sprintf("mailbox partitions, fixed when the streams are first provisioned (changing it later is a migration); unset: what is provisioned, %d when nothing is", bus.DefaultPartitions),
			check: func(c *config, v string) string {
				if v == "" {
					return ""
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > bus.MaxPartitions {
					return fmt.Sprintf("want a whole number from 1 to %d", bus.MaxPartitions)
				}
				c.Partitions = n
				return ""
			}},
		{name: "stream-groups", arg: "G", def: "",
			usage: fmt.Sprintf("stream groups: partitions spread over G mailbox streams and state buckets whose leaders can be on different servers (needs an account subject mapping on an outside server, docs/layout.md); fixed when first provisioned, moving from 1 is --migrate; unset: what is provisioned, 1 when nothing is; at most %d and the partitions", bus.MaxGroups),
			check: func(c *config, v string) string {
				if v == "" {
					return ""
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > bus.MaxGroups {
					return fmt.Sprintf("want a whole number from 1 to %d", bus.MaxGroups)
				}
				c.StreamGroups = n
				return ""
			}},
		{name: "migrate", def: "false",
			usage: "before starting, move a store of a previous layout: stream EA_RECORDS to partitioned mailboxes, or, with --stream-groups above 1, one mailbox stream to stream groups; stop every node of the previous layout first",
			check: func(c *config, v string) string {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return "want true or false"
				}
				c.Migrate = b
				return ""
			}},
		{name: "record-store", def: "true",
			usage: "serve the record store: index the record log and answer <prefix>.store.* queries (docs/store.md)",
			check: func(c *config, v string) string {
				b, err := strconv.ParseBool(v)
				if err != nil {
					return "want true or false"
				}
				c.RecordStore = b
				return ""
			}},
		{name: "prefix", arg: "NAME", def: bus.DefaultPrefix,
			usage: "subject prefix of mailboxes, streams, buckets and control endpoints",
			check: func(c *config, v string) string { return cli.Prefix(v, &c.Prefix) }},
		{name: "replicas", arg: "N", def: "",
			usage: "replicas of streams and buckets (3 on a cluster); unset: what is provisioned, 1 when nothing is",
			check: func(c *config, v string) string {
				if v == "" {
					return ""
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 5 {
					return "want a whole number from 1 to 5"
				}
				c.Replicas = n
				return ""
			}},
		{name: "metrics", shared: cli.MetricsSetting("127.0.0.1:9464", func(c *config) *string { return &c.Metrics })},
		{name: "log-level", shared: cli.LogLevelSetting(func(c *config) *slog.Level { return &c.LogLevel })},
		{name: "log-format", shared: cli.LogFormatSetting(func(c *config) *string { return &c.LogFormat })},
		{name: "memory-limit", shared: cli.MemoryLimitSetting(func(c *config) *int64 { return &c.MemoryLimit })},
		{name: "otlp-endpoint", shared: cli.OTLPSetting(func(c *config) *string { return &c.OTLPEndpoint })},
		{name: "shutdown-grace", arg: "DURATION", def: "10s",
			usage: "on SIGINT or SIGTERM, how long records in hand may finish before their logic is cancelled",
			check: func(c *config, v string) string {
				return cli.PositiveDuration(v, &c.ShutdownGrace, "want a positive duration such as 10s or 1m30s")
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
				return cli.PositiveDuration(v, &c.HeartbeatTTL, "want a positive duration such as 3s, longer than --heartbeat")
			}},
		{name: "idle", arg: "DURATION", def: "2m",
			usage: `how long an effector with nothing to do keeps its consumer before it is passivated (the next record activates it); "off" never passivates`,
			check: func(c *config, v string) string {
				if strings.EqualFold(v, "off") {
					c.IdleTimeout = -1
					return ""
				}
				return cli.PositiveDuration(v, &c.IdleTimeout, `want a positive duration such as 2m or 30s, or "off" to never passivate`)
			}},
		{name: "spread-leaders", arg: "DURATION", def: "15s",
			usage: `how often the node with the lowest id checks that the cluster's stream leaders (each stream group's mailbox, outbox and state, the lease bucket, the timer stream) are spread over the servers, and moves one leader back when a restart or an election left them on fewer servers; "off" never moves a leader (single server: nothing to do)`,
			check: func(c *config, v string) string {
				if strings.EqualFold(v, "off") {
					c.SpreadLeaders = -1
					return ""
				}
				return cli.PositiveDuration(v, &c.SpreadLeaders, `want a positive duration such as 15s or 1m, or "off" to never move a leader`)
			}},
		{name: "reply-subjects", arg: "PATTERNS", def: "",
			defText: strings.Join(bus.DefaultReplySubjects, ",") + " (NATS request inboxes)",
			usage:   `comma-separated NATS subject patterns besides mailboxes that records may name in EA-Reply and logic may reply to; "none" allows none. $-prefixed subjects and the runtime's own (outboxes of others, dead letters, control, orchestration) are always refused`,
			check: func(c *config, v string) string {
				switch v = strings.TrimSpace(v); {
				case v == "":
					c.ReplySubjects = nil
				case strings.EqualFold(v, "none"):
					c.ReplySubjects = []string{}
				default:
					c.ReplySubjects = nil
					for p := range strings.SplitSeq(v, ",") {
						if p = strings.TrimSpace(p); p == "" {
							return `want comma-separated subject patterns such as "_INBOX.>,replies.>", or "none"`
						}
						c.ReplySubjects = append(c.ReplySubjects, p)
					}
				}
				return ""
			}},
		{name: "remote-kinds", arg: "KINDS", def: "",
			defText: "none",
			usage:   `comma-separated kinds whose logic runs in worker processes in any language, asked over NATS request-reply on <prefix>.logic.<kind> (docs/polyglot.md); "kind:msgpack" sends msgpack requests, JSON otherwise`,
			check: func(c *config, v string) string {
				c.RemoteKinds = nil
				if v = strings.TrimSpace(v); v == "" {
					return ""
				}
				const want = `want comma-separated kinds (1-128 characters of A-Z a-z 0-9 _ -), each optionally ":json" or ":msgpack", e.g. "counter,scorer:msgpack"`
				seen := map[string]bool{}
				for item := range strings.SplitSeq(v, ",") {
					name, encName, hasEnc := strings.Cut(strings.TrimSpace(item), ":")
					enc := remote.JSON
					if hasEnc {
						var err error
						if enc, err = remote.ParseEncoding(encName); err != nil {
							return want
						}
					}
					if records.ValidateKind(name) != nil {
						return want
					}
					if seen[name] {
						return "kind " + name + " is listed twice"
					}
					seen[name] = true
					c.RemoteKinds = append(c.RemoteKinds, remoteKind{name: name, enc: enc})
				}
				return ""
			}},
		{name: "remote-timeout", arg: "DURATION", def: "10s",
			usage: "how long the node waits for a worker's answer about one record of a --remote-kinds kind before it retries the record (a worker that died holding it)",
			check: func(c *config, v string) string {
				return cli.PositiveDuration(v, &c.RemoteTimeout, "want a positive duration such as 10s or 500ms")
			}},
	}
	var out []*cli.Setting[config]
	for _, s := range all {
		if s.shared != nil {
			sh := *s.shared
			sh.Name = s.name
			out = append(out, &sh)
		} else {
			out = append(out, &cli.Setting[config]{Name: s.name, Arg: s.arg, Def: s.def, DefText: s.defText, Usage: s.usage, Check: s.check})
		}
		if s.name == "nats" { // how to authenticate goes with where to connect
			out = append(out, cli.AuthSettings(func(c *config) *cli.Auth { return &c.Auth })...)
		}
	}
	out = append(out, cli.RetentionSettings(func(c *config) *bus.Retention { return &c.Retention })...)
	return append(out, llmSettings()...)
}

// remoteKind is one kind of --remote-kinds.
type remoteKind struct {
	name string
	enc  remote.Encoding
}

// Logging is how the node logs; see cli.Run.
func (c config) Logging() (slog.Level, string) { return c.LogLevel, c.LogFormat }

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
		SpreadLeaders: c.SpreadLeaders,
		ReplySubjects: c.ReplySubjects,
	}
}

// parseConfig reads the configuration from args and, for settings no flag
// gives, from the environment through getenv (an empty variable counts as
// unset). It returns flag.ErrHelp for -h and a *cli.UsageError for bad
// input.
func parseConfig(program string, args []string, getenv func(string) string) (config, error) {
	var cfg config
	explicit, err := cli.Parse(program, settings(), args, getenv, &cfg)
	if err != nil {
		return config{}, err
	}
	cfg.explicit = explicit
	cfg.GOMEMLIMIT = getenv("GOMEMLIMIT")
	if err := cfg.Auth.Load(getenv); err != nil {
		return config{}, err
	}
	if err := cfg.loadLLM(getenv); err != nil {
		return config{}, err
	}
	if names, err := bus.NewNames(cfg.Prefix); err == nil {
		if _, err := names.Routes(cfg.ReplySubjects); err != nil {
			return config{}, cli.Usagef("--reply-subjects: %v", err)
		}
	}
	if ttl := cfg.heartbeatTTL(); ttl <= cfg.Heartbeat {
		return config{}, cli.Usagef("--heartbeat-ttl %s must exceed --heartbeat %s: a node would count as dead between two of its own heartbeats (use about 3 heartbeats)", ttl, cfg.Heartbeat)
	}
	return cfg, nil
}

// usage is the text -h prints: the usage line of program, about (what the
// binary does, ending in a blank line), then the flags.
func usage(program, about string) string {
	return cli.Usage("Usage: "+program+" [flags]\n\n"+about, settings(), "serving its kinds")
}
