package main

import (
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/cli"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want config
	}{
		{"defaults", nil, nil, config{NATS: DefaultNATS, Prefix: "ea", Metrics: "127.0.0.1:9465", LogLevel: slog.LevelInfo, LogFormat: "text", ConnectTimeout: time.Minute}},
		{"env", nil, map[string]string{"EA_NATS": "nats://a:4222,nats://b:4222", "EA_PREFIX": "dev-1", "EA_METRICS": "off",
			"EA_LOG_LEVEL": "debug", "EA_LOG_FORMAT": "json", "EA_CONNECT_TIMEOUT": "5s"},
			config{NATS: "nats://a:4222,nats://b:4222", Prefix: "dev-1", Metrics: "", LogLevel: slog.LevelDebug, LogFormat: "json", ConnectTimeout: 5 * time.Second}},
		{"flags win", []string{"--nats", "nats://f:1", "--prefix=p", "--metrics", ":1", "--log-level", "WARN", "--log-format", "text", "--connect-timeout", "1m30s"},
			map[string]string{"EA_NATS": "nats://e:1", "EA_PREFIX": "e", "EA_LOG_LEVEL": "debug"},
			config{NATS: "nats://f:1", Prefix: "p", Metrics: ":1", LogLevel: slog.LevelWarn, LogFormat: "text", ConnectTimeout: 90 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.args, envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--nats", " "}, nil, `--nats " ": want a NATS URL such as nats://127.0.0.1:4222 (ea-supervisor does not embed a server)`},
		{[]string{"--prefix", "a.b"}, nil, `--prefix "a.b": want one subject token: 1-128 characters of A-Z a-z 0-9 _ -`},
		{nil, map[string]string{"EA_LOG_LEVEL": "loud"}, `--log-level "loud" (from EA_LOG_LEVEL): want debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, nil, `--log-format "xml": want text or json`},
		{[]string{"--metrics", "9465"}, nil, `--metrics "9465": want host:port, e.g. 127.0.0.1:9465, or "off" (or empty) to disable`},
		{[]string{"--connect-timeout", "0s"}, nil, `--connect-timeout "0s": want a positive duration such as 60s or 2m`},
		{[]string{"--store", "x"}, nil, `flag provided but not defined: -store`},
		{[]string{"extra"}, nil, `unexpected argument "extra": ea-supervisor takes flags only`},
	} {
		_, err := parseConfig(tc.args, envOf(tc.env))
		var ue *cli.UsageError
		if !errors.As(err, &ue) || err.Error() != tc.want {
			t.Errorf("parseConfig(%q, %v):\n got %v\nwant %s", tc.args, tc.env, err, tc.want)
			continue
		}
		if got := cli.ExitStatus("ea-supervisor", err, &strings.Builder{}); got != 2 {
			t.Errorf("exit status of %v = %d, want 2", err, got)
		}
	}
	for _, arg := range []string{"-h", "--help"} {
		if _, err := parseConfig([]string{arg}, envOf(nil)); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseConfig(%s) = %v, want flag.ErrHelp", arg, err)
		}
	}
}

func TestUsageListsEveryFlag(t *testing.T) {
	u := usage()
	for _, s := range settings() {
		for _, want := range []string{"--" + s.Name, "env " + s.Env() + "; default " + s.DefaultText()} {
			if !strings.Contains(u, want) {
				t.Errorf("usage lacks %q", want)
			}
		}
	}
}
