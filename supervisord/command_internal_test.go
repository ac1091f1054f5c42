package supervisord

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/web"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want config
	}{
		{"defaults", nil, nil, config{NATS: defaultNATS, Prefix: "ea", Metrics: "127.0.0.1:9465", LogLevel: slog.LevelInfo, LogFormat: "text", ConnectTimeout: time.Minute, Gateway: "127.0.0.1:9466"}},
		{"gateway beyond loopback with a token", []string{"--gateway", ":9466", "--gateway-origins", " app.example.com, *.example.com "}, map[string]string{"EA_GATEWAY_TOKEN": "t0k"},
			config{NATS: defaultNATS, Prefix: "ea", Metrics: "127.0.0.1:9465", LogLevel: slog.LevelInfo, LogFormat: "text", ConnectTimeout: time.Minute,
				Gateway: ":9466", GatewayToken: "t0k", GatewayOrigins: "app.example.com,*.example.com"}},
		{"gateway with users from env", []string{"--gateway", "0.0.0.0:9466"}, map[string]string{"EA_GATEWAY_USERS": usersFile(t, dir, "alice user "+web.HashToken("t")+"\n")},
			config{NATS: defaultNATS, Prefix: "ea", Metrics: "127.0.0.1:9465", LogLevel: slog.LevelInfo, LogFormat: "text", ConnectTimeout: time.Minute,
				Gateway: "0.0.0.0:9466", GatewayUsers: usersFile(t, dir, "alice user "+web.HashToken("t")+"\n")}},
		{"env", nil, map[string]string{"EA_NATS": "nats://a:4222,nats://b:4222", "EA_PREFIX": "dev-1", "EA_METRICS": "off",
			"EA_LOG_LEVEL": "debug", "EA_LOG_FORMAT": "json", "EA_CONNECT_TIMEOUT": "5s"},
			config{NATS: "nats://a:4222,nats://b:4222", Prefix: "dev-1", Metrics: "", LogLevel: slog.LevelDebug, LogFormat: "json", ConnectTimeout: 5 * time.Second, Gateway: "127.0.0.1:9466"}},
		{"flags win", []string{"--nats", "nats://f:1", "--prefix=p", "--metrics", ":1", "--log-level", "WARN", "--log-format", "text", "--connect-timeout", "1m30s"},
			map[string]string{"EA_NATS": "nats://e:1", "EA_PREFIX": "e", "EA_LOG_LEVEL": "debug"},
			config{NATS: "nats://f:1", Prefix: "p", Metrics: ":1", LogLevel: slog.LevelWarn, LogFormat: "text", ConnectTimeout: 90 * time.Second, Gateway: "127.0.0.1:9466"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig("ea-supervisor", tc.args, envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got.Auth = cli.Auth{} // see TestAuthSettings
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// usersFile writes content to a file of dir named after its hash and
// returns its path (the same for the same content).
func usersFile(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, strings.TrimPrefix(web.HashToken(content), web.TokenHashPrefix))
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--nats", " "}, nil, `--nats " ": want a NATS URL such as nats://127.0.0.1:4222 (a supervisor does not embed a server)`},
		{[]string{"--prefix", "a.b"}, nil, `--prefix "a.b": want one subject token: 1-128 characters of A-Z a-z 0-9 _ -`},
		{nil, map[string]string{"EA_LOG_LEVEL": "loud"}, `--log-level "loud" (from EA_LOG_LEVEL): want debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, nil, `--log-format "xml": want text or json`},
		{[]string{"--metrics", "9465"}, nil, `--metrics "9465": want host:port, e.g. 127.0.0.1:9465, or "off" (or empty) to disable`},
		{[]string{"--connect-timeout", "0s"}, nil, `--connect-timeout "0s": want a positive duration such as 60s or 2m`},
		{[]string{"--store", "x"}, nil, `flag provided but not defined: -store`},
		{[]string{"extra"}, nil, `unexpected argument "extra": ea-supervisor takes flags only`},
		{[]string{"--gateway", "0.0.0.0:9466"}, nil, `--gateway "0.0.0.0:9466": addr "0.0.0.0:9466" is not a loopback address: set a users file (--gateway-users) or a token (--gateway-token-file or EA_GATEWAY_TOKEN) before serving the gateway beyond this machine`},
		{[]string{"--gateway", "9466"}, nil, `--gateway "9466": want host:port, e.g. 127.0.0.1:9466, or "off" to disable`},
		{[]string{"--gateway-token-file", "/nonexistent/token"}, nil, `--gateway-token-file "/nonexistent/token": want a readable file holding the token: open /nonexistent/token: no such file or directory`},
		{[]string{"--gateway-users", "/nonexistent/users"}, nil, `--gateway-users "/nonexistent/users": users file: open /nonexistent/users: no such file or directory`},
		{[]string{"--gateway-users", usersFile(t, dir, "alice user s3cret\n")}, nil, `--gateway-users "` + usersFile(t, dir, "alice user s3cret\n") + `": users file line 1: token hash must start with "sha256:": write the SHA-256 of the token, never the token (printf %s "$TOKEN" | sha256sum)`},
		{[]string{"--gateway-origins", "https://app.example.com"}, nil, `--gateway-origins "https://app.example.com": want host patterns without scheme or path, e.g. app.example.com,*.example.com`},
	} {
		_, err := parseConfig("ea-supervisor", tc.args, envOf(tc.env))
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
		if _, err := parseConfig("ea-supervisor", []string{arg}, envOf(nil)); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseConfig(%s) = %v, want flag.ErrHelp", arg, err)
		}
	}
}

func TestUsageListsEveryFlag(t *testing.T) {
	u := usage("ea-supervisor", "About.\n\n")
	for _, s := range settings() {
		for _, want := range []string{"--" + s.Name, "env " + s.Env() + "; default " + s.DefaultText()} {
			if !strings.Contains(u, want) {
				t.Errorf("usage lacks %q", want)
			}
		}
	}
}

func TestCommandRun(t *testing.T) {
	var out, errOut strings.Builder
	if err := (Command{Name: "x"}).Run(t.Context(), nil, envOf(nil), &out, &errOut); !errors.Is(err, ErrNoDefinitions) {
		t.Errorf("Run with no definitions = %v, want ErrNoDefinitions", err)
	}
	b := graph.New[struct{}]()
	b.AddNode("n", func(context.Context, struct{}) (graph.Update[struct{}], error) { return graph.Update[struct{}]{}, nil })
	b.AddEdge(graph.START, "n").AddEdge("n", graph.END)
	def, err := supervisor.Define(supervisor.Spec[struct{}]{Name: "mine", Graph: b})
	if err != nil {
		t.Fatal(err)
	}
	cmd := Command{Name: "my-supervisor", Definitions: []supervisor.Definition{def}}
	if err := cmd.Run(t.Context(), []string{"-h"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: my-supervisor [flags]", "It runs orchestrations", "<prefix>.orch.start", "--nats URLS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, out.String())
		}
	}
	var ue *cli.UsageError
	if err := cmd.Run(t.Context(), []string{"extra"}, envOf(nil), &out, &errOut); !errors.As(err, &ue) || err.Error() != `unexpected argument "extra": my-supervisor takes flags only` {
		t.Errorf("Run extra = %v", err)
	}
}
