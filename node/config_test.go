package node

import (
	"errors"
	"flag"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/cli"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := parseConfig("ea-node", nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		NATS: "", Listen: "127.0.0.1:4222", Store: "./data", SyncAlways: false, Prefix: "ea",
		Partitions: 0, RecordStore: true, Replicas: 0, // 0: what is provisioned
		Metrics: "127.0.0.1:9464", LogLevel: slog.LevelInfo, LogFormat: "text",
		ShutdownGrace: 10 * time.Second, MemoryLimit: -1, Heartbeat: time.Second, IdleTimeout: 2 * time.Minute,
		SpreadLeaders: 15 * time.Second, RemoteTimeout: 10 * time.Second,
	}
	if len(cfg.explicit) != 0 {
		t.Errorf("explicit = %v, want none", cfg.explicit)
	}
	cfg.explicit = nil
	if cfg.Auth.Method() != "none" {
		t.Errorf("auth = %s, want none", cfg.Auth.Method())
	}
	cfg.Auth = cli.Auth{}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		check func(config) bool
	}{
		{"env nats", nil, map[string]string{"EA_NATS": "nats://a:4222,nats://b:4222"},
			func(c config) bool { return c.NATS == "nats://a:4222,nats://b:4222" }},
		{"retention", []string{"--log-max-bytes", "10GB", "--dead-max-age", "unlimited"}, map[string]string{"EA_LOG_MAX_AGE": "30d", "EA_DEAD_MAX_BYTES": "1GiB"},
			func(c config) bool {
				return c.Retention == bus.Retention{LogMaxAge: 720 * time.Hour, LogMaxBytes: 10e9, DeadMaxAge: bus.Unlimited, DeadMaxBytes: 1 << 30}
			}},
		{"flag nats wins", []string{"--nats", "nats://flag:4222"}, map[string]string{"EA_NATS": "nats://env:4222"},
			func(c config) bool { return c.NATS == "nats://flag:4222" }},
		{"env listen", nil, map[string]string{"EA_LISTEN": "0.0.0.0:5222"},
			func(c config) bool { return c.Listen == "0.0.0.0:5222" }},
		{"env store, flag wins", []string{"-store=/tmp/x"}, map[string]string{"EA_STORE": "/tmp/env"},
			func(c config) bool { return c.Store == "/tmp/x" && c.explicit["store"] }},
		{"env sync-always", nil, map[string]string{"EA_SYNC_ALWAYS": "true"},
			func(c config) bool { return c.SyncAlways }},
		{"bare bool flag", []string{"--sync-always"}, nil,
			func(c config) bool { return c.SyncAlways }},
		{"bool flag false wins over env", []string{"--sync-always=false"}, map[string]string{"EA_SYNC_ALWAYS": "1"},
			func(c config) bool { return !c.SyncAlways }},
		{"env prefix", nil, map[string]string{"EA_PREFIX": "dev-1"},
			func(c config) bool { return c.Prefix == "dev-1" }},
		{"replicas flag wins", []string{"--replicas", "3"}, map[string]string{"EA_REPLICAS": "5"},
			func(c config) bool { return c.Replicas == 3 }},
		{"metrics empty disables", []string{"--metrics", ""}, nil,
			func(c config) bool { return c.Metrics == "" }},
		{"metrics off from env disables", nil, map[string]string{"EA_METRICS": "off"},
			func(c config) bool { return c.Metrics == "" }},
		{"env metrics", nil, map[string]string{"EA_METRICS": ":9999"},
			func(c config) bool { return c.Metrics == ":9999" }},
		{"env log level", nil, map[string]string{"EA_LOG_LEVEL": "debug"},
			func(c config) bool { return c.LogLevel == slog.LevelDebug }},
		{"log level flag wins", []string{"--log-level=error"}, map[string]string{"EA_LOG_LEVEL": "debug"},
			func(c config) bool { return c.LogLevel == slog.LevelError }},
		{"log level any case", []string{"--log-level", "WARN"}, nil,
			func(c config) bool { return c.LogLevel == slog.LevelWarn }},
		{"env log format", nil, map[string]string{"EA_LOG_FORMAT": "json"},
			func(c config) bool { return c.LogFormat == "json" }},
		{"env shutdown grace", nil, map[string]string{"EA_SHUTDOWN_GRACE": "1m30s"},
			func(c config) bool { return c.ShutdownGrace == 90*time.Second }},
		{"shutdown grace flag wins", []string{"--shutdown-grace", "3s"}, map[string]string{"EA_SHUTDOWN_GRACE": "1m"},
			func(c config) bool { return c.ShutdownGrace == 3*time.Second }},
		{"env node id", nil, map[string]string{"EA_NODE_ID": "node-a"},
			func(c config) bool { return c.NodeID == "node-a" }},
		{"node id flag wins", []string{"--node-id", "b_2"}, map[string]string{"EA_NODE_ID": "node-a"},
			func(c config) bool { return c.NodeID == "b_2" }},
		{"env heartbeat, ttl three beats", nil, map[string]string{"EA_HEARTBEAT": "200ms"},
			func(c config) bool {
				return c.Heartbeat == 200*time.Millisecond && c.heartbeatTTL() == 600*time.Millisecond
			}},
		{"long heartbeat, derived ttl", []string{"--heartbeat", "5s"}, nil,
			func(c config) bool { return c.heartbeatTTL() == 15*time.Second }},
		{"default ttl 3s", nil, nil,
			func(c config) bool { return c.heartbeatTTL() == 3*time.Second }},
		{"heartbeat ttl flag wins", []string{"--heartbeat-ttl", "2s"}, map[string]string{"EA_HEARTBEAT_TTL": "9s"},
			func(c config) bool { return c.heartbeatTTL() == 2*time.Second }},
		{"env idle", nil, map[string]string{"EA_IDLE": "30s"},
			func(c config) bool { return c.IdleTimeout == 30*time.Second }},
		{"idle off", []string{"--idle", "off"}, nil,
			func(c config) bool { return c.IdleTimeout < 0 }},
		{"idle OFF from env", nil, map[string]string{"EA_IDLE": "OFF"},
			func(c config) bool { return c.IdleTimeout < 0 }},
		{"default memory limit", nil, nil,
			func(c config) bool { return c.MemoryLimit == -1 && c.GOMEMLIMIT == "" }},
		{"memory limit flag wins", []string{"--memory-limit", "1GiB"}, map[string]string{"EA_MEMORY_LIMIT": "200MiB"},
			func(c config) bool { return c.MemoryLimit == 1<<30 }},
		{"memory limit off from env", nil, map[string]string{"EA_MEMORY_LIMIT": "off"},
			func(c config) bool { return c.MemoryLimit == -1 }},
		{"GOMEMLIMIT seen", nil, map[string]string{"GOMEMLIMIT": "300MiB"},
			func(c config) bool { return c.GOMEMLIMIT == "300MiB" && c.MemoryLimit == -1 }},
		{"default not explicit", nil, nil,
			func(c config) bool { return len(c.explicit) == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig("ea-node", tc.args, envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string // the whole message
	}{
		{[]string{"--log-level", "loud"}, nil, `--log-level "loud": want debug, info, warn or error`},
		{nil, map[string]string{"EA_LOG_LEVEL": "loud"}, `--log-level "loud" (from EA_LOG_LEVEL): want debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, nil, `--log-format "xml": want text or json`},
		{[]string{"--replicas", "0"}, nil, `--replicas "0": want a whole number from 1 to 5`},
		{[]string{"--replicas", "three"}, nil, `--replicas "three": want a whole number from 1 to 5`},
		{nil, map[string]string{"EA_REPLICAS": "7"}, `--replicas "7" (from EA_REPLICAS): want a whole number from 1 to 5`},
		{[]string{"--sync-always=maybe"}, nil, `--sync-always "maybe": want true or false`},
		{[]string{"--prefix", "a.b"}, nil, `--prefix "a.b": want one subject token: 1-128 characters of A-Z a-z 0-9 _ -`},
		{[]string{"--prefix", ""}, nil, `--prefix "": want one subject token: 1-128 characters of A-Z a-z 0-9 _ -`},
		{[]string{"--listen", "4222"}, nil, `--listen "4222": want host:port, e.g. 127.0.0.1:4222 (port 0 picks a free one)`},
		{[]string{"--metrics", "localhost:http"}, nil, `--metrics "localhost:http": want host:port, e.g. 127.0.0.1:9464, or "off" (or empty) to disable`},
		{[]string{"--store", ""}, nil, `--store "": want a directory path`},
		{[]string{"--shutdown-grace", "10"}, nil, `--shutdown-grace "10": want a positive duration such as 10s or 1m30s`},
		{[]string{"--shutdown-grace", "-1s"}, nil, `--shutdown-grace "-1s": want a positive duration such as 10s or 1m30s`},
		{[]string{"--node-id", "a.b"}, nil, `--node-id "a.b": want 1-128 characters of A-Z a-z 0-9 _ - (or empty for a random id)`},
		{nil, map[string]string{"EA_NODE_ID": "x y"}, `--node-id "x y" (from EA_NODE_ID): want 1-128 characters of A-Z a-z 0-9 _ - (or empty for a random id)`},
		{[]string{"--heartbeat", "1"}, nil, `--heartbeat "1": want a duration of at least 10ms, such as 1s or 500ms`},
		{[]string{"--heartbeat", "1ms"}, nil, `--heartbeat "1ms": want a duration of at least 10ms, such as 1s or 500ms`},
		{[]string{"--heartbeat-ttl", "0s"}, nil, `--heartbeat-ttl "0s": want a positive duration such as 3s, longer than --heartbeat`},
		{[]string{"--heartbeat", "2s", "--heartbeat-ttl", "2s"}, nil,
			`--heartbeat-ttl 2s must exceed --heartbeat 2s: a node would count as dead between two of its own heartbeats (use about 3 heartbeats)`},
		{nil, map[string]string{"EA_HEARTBEAT": "5s", "EA_HEARTBEAT_TTL": "3s"},
			`--heartbeat-ttl 3s must exceed --heartbeat 5s: a node would count as dead between two of its own heartbeats (use about 3 heartbeats)`},
		{[]string{"--idle", "0"}, nil, `--idle "0": want a positive duration such as 2m or 30s, or "off" to never passivate`},
		{[]string{"--idle", "never"}, nil, `--idle "never": want a positive duration such as 2m or 30s, or "off" to never passivate`},
		{[]string{"--spread-leaders", "0"}, nil, `--spread-leaders "0": want a positive duration such as 15s or 1m, or "off" to never move a leader`},
		{nil, map[string]string{"EA_SPREAD_LEADERS": "sometimes"}, `--spread-leaders "sometimes" (from EA_SPREAD_LEADERS): want a positive duration such as 15s or 1m, or "off" to never move a leader`},
		{[]string{"--memory-limit", "10MiB"}, nil, `--memory-limit "10MiB": want a size such as 80MiB, 512MiB or 2GiB (at least 16MiB), or "off" for no limit`},
		{[]string{"--bogus"}, nil, `flag provided but not defined: -bogus`},
		{[]string{"--nats"}, nil, `flag needs an argument: -nats`},
		{[]string{"--sync-always", "false"}, nil, `unexpected argument "false": ea-node takes flags only (a bool flag takes its value as --flag=false)`},
	} {
		_, err := parseConfig("ea-node", tc.args, envOf(tc.env))
		var ue *cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("parseConfig(%q, %v) = %v, want a usage error", tc.args, tc.env, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("parseConfig(%q, %v):\n got %s\nwant %s", tc.args, tc.env, err, tc.want)
		}
		if got := cli.ExitStatus("ea-node", err, &strings.Builder{}); got != 2 {
			t.Errorf("exit status of %v = %d, want 2", err, got)
		}
	}
}

func TestParseConfigHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		if _, err := parseConfig("ea-node", []string{arg}, envOf(nil)); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseConfig(%s) = %v, want flag.ErrHelp", arg, err)
		}
	}
}

func TestUsageListsEveryFlag(t *testing.T) {
	u := usage("ea-node", "About.\n\n")
	for _, s := range settings() {
		def := s.DefaultText()
		switch {
		case s.DefText != "" && s.Def != "":
			t.Errorf("--%s has both a default %q and a default text %q", s.Name, s.Def, s.DefText)
		case s.DefText == "" && s.Def == "" && def != "empty", s.DefText == "" && s.Def != "" && def != `"`+s.Def+`"`:
			t.Errorf("--%s: default shown as %s", s.Name, def)
		}
		for _, want := range []string{"--" + s.Name, "env " + s.Env() + "; default " + def} {
			if !strings.Contains(u, want) {
				t.Errorf("usage lacks %q:\n%s", want, u)
			}
		}
	}
}

func TestEnvNames(t *testing.T) {
	want := map[string]string{
		"nats": "EA_NATS", "listen": "EA_LISTEN", "store": "EA_STORE", "sync-always": "EA_SYNC_ALWAYS",
		"prefix": "EA_PREFIX", "replicas": "EA_REPLICAS", "metrics": "EA_METRICS",
		"log-level": "EA_LOG_LEVEL", "log-format": "EA_LOG_FORMAT", "shutdown-grace": "EA_SHUTDOWN_GRACE", "memory-limit": "EA_MEMORY_LIMIT",
		"node-id": "EA_NODE_ID", "heartbeat": "EA_HEARTBEAT", "heartbeat-ttl": "EA_HEARTBEAT_TTL", "idle": "EA_IDLE", "spread-leaders": "EA_SPREAD_LEADERS",
		"reply-subjects": "EA_REPLY_SUBJECTS", "partitions": "EA_PARTITIONS", "stream-groups": "EA_STREAM_GROUPS", "migrate": "EA_MIGRATE", "record-store": "EA_RECORD_STORE",
		"log-max-age": "EA_LOG_MAX_AGE", "log-max-bytes": "EA_LOG_MAX_BYTES", "dead-max-age": "EA_DEAD_MAX_AGE", "dead-max-bytes": "EA_DEAD_MAX_BYTES",
		"server-config": "EA_SERVER_CONFIG", "creds": "EA_CREDS", "nkey": "EA_NKEY", "user": "EA_USER", "password-file": "EA_PASSWORD_FILE",
		"token-file": "EA_TOKEN_FILE", "tls-ca": "EA_TLS_CA", "tls-cert": "EA_TLS_CERT", "tls-key": "EA_TLS_KEY",
		"remote-kinds": "EA_REMOTE_KINDS", "remote-timeout": "EA_REMOTE_TIMEOUT",
		"llm-base-url": "EA_LLM_BASE_URL", "llm-model": "EA_LLM_MODEL", "llm-embed-model": "EA_LLM_EMBED_MODEL",
		"llm-api-key-file": "EA_LLM_API_KEY_FILE", "tools": "EA_TOOLS",
		"otlp-endpoint": "EA_OTLP_ENDPOINT",
	}
	all := settings()
	if len(all) != len(want) {
		t.Errorf("%d settings, want %d", len(all), len(want))
	}
	for _, s := range all {
		if s.Env() != want[s.Name] {
			t.Errorf("env of --%s = %s, want %s", s.Name, s.Env(), want[s.Name])
		}
	}
}

// TestActorOptions checks the placement settings reach actor.Options.
func TestActorOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want actor.Options
	}{
		{nil, actor.Options{ShutdownGrace: 10 * time.Second, Heartbeat: time.Second, HeartbeatTTL: 3 * time.Second, IdleTimeout: 2 * time.Minute, SpreadLeaders: 15 * time.Second}},
		{[]string{"--node-id", "a1", "--heartbeat", "250ms", "--heartbeat-ttl", "1s", "--idle", "off", "--shutdown-grace", "2s", "--spread-leaders", "off"},
			actor.Options{NodeID: "a1", ShutdownGrace: 2 * time.Second, Heartbeat: 250 * time.Millisecond, HeartbeatTTL: time.Second, IdleTimeout: -1, SpreadLeaders: -1}},
		{[]string{"--spread-leaders", "1m"},
			actor.Options{ShutdownGrace: 10 * time.Second, Heartbeat: time.Second, HeartbeatTTL: 3 * time.Second, IdleTimeout: 2 * time.Minute, SpreadLeaders: time.Minute}},
	} {
		cfg, err := parseConfig("ea-node", tc.args, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.actorOptions(nil, nil)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: actor options\n got %+v\nwant %+v", tc.args, got, tc.want)
		}
	}
}

// TestOTLPEndpoint: --otlp-endpoint (EA_OTLP_ENDPOINT) takes the base URL of
// an OTLP/HTTP receiver and refuses anything else with a usage error.
func TestOTLPEndpoint(t *testing.T) {
	cfg, err := parseConfig("ea-node", nil, envOf(map[string]string{"EA_OTLP_ENDPOINT": "http://collector:4318"}))
	if err != nil || cfg.OTLPEndpoint != "http://collector:4318" {
		t.Fatalf("EA_OTLP_ENDPOINT: %q %v", cfg.OTLPEndpoint, err)
	}
	if cfg, err := parseConfig("ea-node", nil, envOf(nil)); err != nil || cfg.OTLPEndpoint != "" {
		t.Fatalf("default: %q %v, want empty (off)", cfg.OTLPEndpoint, err)
	}
	_, err = parseConfig("ea-node", []string{"--otlp-endpoint", "collector:4318"}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), "otlp-endpoint") || !strings.Contains(err.Error(), "http://localhost:4318") {
		t.Fatalf("--otlp-endpoint collector:4318: %v, want a usage error naming the flag and an example", err)
	}
}
