package main

import (
	"errors"
	"flag"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		NATS: "", Listen: "127.0.0.1:4222", Store: "./data", SyncAlways: false, Prefix: "ea",
		Replicas: 1, Metrics: "127.0.0.1:9464", LogLevel: slog.LevelInfo, LogFormat: "text",
		ShutdownGrace: 10 * time.Second,
	}
	if len(cfg.explicit) != 0 {
		t.Errorf("explicit = %v, want none", cfg.explicit)
	}
	cfg.explicit = nil
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
		{"default not explicit", nil, nil,
			func(c config) bool { return len(c.explicit) == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, envOf(tc.env))
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
		{[]string{"--bogus"}, nil, `flag provided but not defined: -bogus`},
		{[]string{"--nats"}, nil, `flag needs an argument: -nats`},
		{[]string{"--sync-always", "false"}, nil, `unexpected argument "false": ea-node takes flags only (a bool flag takes its value as --flag=false)`},
	} {
		_, err := parseConfig(tc.args, envOf(tc.env))
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("parseConfig(%q, %v) = %v, want a usage error", tc.args, tc.env, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("parseConfig(%q, %v):\n got %s\nwant %s", tc.args, tc.env, err, tc.want)
		}
		if got := exitStatus(err, &strings.Builder{}); got != 2 {
			t.Errorf("exit status of %v = %d, want 2", err, got)
		}
	}
}

func TestParseConfigHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		if _, err := parseConfig([]string{arg}, envOf(nil)); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseConfig(%s) = %v, want flag.ErrHelp", arg, err)
		}
	}
}

func TestUsageListsEveryFlag(t *testing.T) {
	u := usage()
	for _, s := range settings() {
		def := `"` + s.def + `"`
		if s.def == "" {
			def = "empty"
		}
		for _, want := range []string{"--" + s.name, "env " + s.env() + "; default " + def} {
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
		"log-level": "EA_LOG_LEVEL", "log-format": "EA_LOG_FORMAT", "shutdown-grace": "EA_SHUTDOWN_GRACE",
	}
	all := settings()
	if len(all) != len(want) {
		t.Errorf("%d settings, want %d", len(all), len(want))
	}
	for _, s := range all {
		if s.env() != want[s.name] {
			t.Errorf("env of --%s = %s, want %s", s.name, s.env(), want[s.name])
		}
	}
}
