package main

import (
	"log/slog"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/cli"
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
	Retention      bus.Retention // of the record log and dead letters
}

// Logging is how the supervisor logs; see cli.Run.
func (c config) Logging() (slog.Level, string) { return c.LogLevel, c.LogFormat }

// DefaultNATS is where ea-supervisor connects by default: the embedded
// server of an ea-node started with no flags.
const DefaultNATS = "nats://127.0.0.1:4222"

// settings returns the supervisor's settings, in the order the usage lists
// them.
func settings() []*cli.Setting[config] {
	return append([]*cli.Setting[config]{
		{Name: "nats", Arg: "URLS", Def: DefaultNATS,
			Usage: "NATS server URL(s), comma-separated: the NATS the nodes use (an ea-node with no --nats embeds one on 127.0.0.1:4222)",
			Check: func(c *config, v string) string {
				if strings.TrimSpace(v) == "" {
					return "want a NATS URL such as nats://127.0.0.1:4222 (ea-supervisor does not embed a server)"
				}
				c.NATS = strings.TrimSpace(v)
				return ""
			}},
		{Name: "prefix", Arg: "NAME", Def: bus.DefaultPrefix,
			Usage: "subject prefix of mailboxes, streams, buckets and the orchestration API (the nodes' --prefix)",
			Check: func(c *config, v string) string { return cli.Prefix(v, &c.Prefix) }},
		cli.MetricsSetting("127.0.0.1:9465", func(c *config) *string { return &c.Metrics }),
		cli.LogLevelSetting(func(c *config) *slog.Level { return &c.LogLevel }),
		cli.LogFormatSetting(func(c *config) *string { return &c.LogFormat }),
		{Name: "connect-timeout", Arg: "DURATION", Def: "60s",
			Usage: "how long to keep trying to reach NATS at start (e.g. while ea-node starts)",
			Check: func(c *config, v string) string {
				return cli.PositiveDuration(v, &c.ConnectTimeout, "want a positive duration such as 60s or 2m")
			}},
	}, cli.RetentionSettings(func(c *config) *bus.Retention { return &c.Retention })...)
}

// parseConfig reads the configuration from args and, for settings no flag
// gives, from the environment through getenv (an empty variable counts as
// unset). It returns flag.ErrHelp for -h and a *cli.UsageError for bad
// input.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	var cfg config
	if _, err := cli.Parse("ea-supervisor", settings(), args, getenv, &cfg); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// usage is the text -h prints.
func usage() string {
	return cli.Usage(`Usage: ea-supervisor [flags]

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

`, settings(), "serving orchestrations")
}
