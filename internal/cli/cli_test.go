package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testConfig struct {
	Name    string
	Verbose bool
	Level   slog.Level
}

func testSettings() []*Setting[testConfig] {
	return []*Setting[testConfig]{
		{Name: "name", Arg: "NAME", Def: "anon", Usage: "who",
			Check: func(c *testConfig, v string) string {
				if v == "bad" {
					return "want a good name"
				}
				c.Name = v
				return ""
			}},
		{Name: "log-level", Arg: "LEVEL", Def: "info", Usage: "level",
			Check: func(c *testConfig, v string) string { return LogLevel(v, &c.Level) }},
	}
}

func withBool() []*Setting[testConfig] {
	return append(testSettings(), &Setting[testConfig]{Name: "verbose-mode", Def: "false", DefText: "off", Usage: "talk",
		Check: func(c *testConfig, v string) string { c.Verbose = v == "true"; return "" }})
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		env      map[string]string
		want     testConfig
		explicit string
	}{
		{nil, nil, testConfig{Name: "anon", Level: slog.LevelInfo}, ""},
		{nil, map[string]string{"EA_NAME": "env", "EA_LOG_LEVEL": ""}, testConfig{Name: "env"}, "name"},
		{[]string{"--name", "flag"}, map[string]string{"EA_NAME": "env"}, testConfig{Name: "flag"}, "name"},
		{[]string{"-log-level=DEBUG", "--verbose-mode"}, nil, testConfig{Name: "anon", Level: slog.LevelDebug, Verbose: true}, "log-level,verbose-mode"},
		{nil, map[string]string{"EA_VERBOSE_MODE": "true"}, testConfig{Name: "anon", Verbose: true}, "verbose-mode"},
	} {
		var cfg testConfig
		explicit, err := Parse("prog", withBool(), tc.args, envOf(tc.env), &cfg)
		if err != nil {
			t.Fatalf("Parse(%q, %v): %v", tc.args, tc.env, err)
		}
		if cfg != tc.want {
			t.Errorf("Parse(%q, %v) = %+v, want %+v", tc.args, tc.env, cfg, tc.want)
		}
		var names []string
		for _, s := range withBool() {
			if explicit[s.Name] {
				names = append(names, s.Name)
			}
		}
		if got := strings.Join(names, ","); got != tc.explicit || len(explicit) != len(names) {
			t.Errorf("Parse(%q, %v) explicit = %v, want %s", tc.args, tc.env, explicit, tc.explicit)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		settings []*Setting[testConfig]
		args     []string
		env      map[string]string
		want     string
	}{
		{testSettings(), []string{"--name", "bad"}, nil, `--name "bad": want a good name`},
		{testSettings(), nil, map[string]string{"EA_NAME": "bad"}, `--name "bad" (from EA_NAME): want a good name`},
		{testSettings(), []string{"--log-level", "loud"}, nil, `--log-level "loud": want debug, info, warn or error`},
		{testSettings(), []string{"--bogus"}, nil, `flag provided but not defined: -bogus`},
		{testSettings(), []string{"--name"}, nil, `flag needs an argument: -name`},
		{testSettings(), []string{"extra"}, nil, `unexpected argument "extra": prog takes flags only`},
		{withBool(), []string{"--verbose-mode", "false"}, nil, `unexpected argument "false": prog takes flags only (a bool flag takes its value as --flag=false)`},
		// A secret in a refused value is never echoed.
		{testSettings(), []string{"--log-level", "nats://u:s3cret@h:4222"}, nil, `--log-level "nats://u:REDACTED@h:4222": want debug, info, warn or error`},
		{testSettings(), nil, map[string]string{"EA_LOG_LEVEL": "nats://t0ken@h"}, `--log-level "nats://REDACTED@h" (from EA_LOG_LEVEL): want debug, info, warn or error`},
		{testSettings(), []string{"nats://u:s3cret@h:4222"}, nil, `unexpected argument "nats://u:REDACTED@h:4222": prog takes flags only`},
	} {
		var cfg testConfig
		_, err := Parse("prog", tc.settings, tc.args, envOf(tc.env), &cfg)
		var ue *UsageError
		if !errors.As(err, &ue) || err.Error() != tc.want {
			t.Errorf("Parse(%q, %v):\n got %v\nwant %s", tc.args, tc.env, err, tc.want)
		}
	}
	for _, arg := range []string{"-h", "--help"} {
		var cfg testConfig
		if _, err := Parse("prog", testSettings(), []string{arg}, envOf(nil), &cfg); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("Parse(%s) = %v, want flag.ErrHelp", arg, err)
		}
	}
	if _, err := Parse[testConfig]("prog", testSettings(), nil, envOf(nil), nil); err == nil {
		t.Error("Parse with a nil cfg succeeded")
	}
}

func TestWriteFlags(t *testing.T) {
	s := append(withBool(), &Setting[testConfig]{Name: "id", Arg: "ID", Usage: "an id", Check: func(*testConfig, string) string { return "" }})
	var b strings.Builder
	WriteFlags(&b, s)
	want := `  --name NAME
        who
        (env EA_NAME; default "anon")
  --log-level LEVEL
        level
        (env EA_LOG_LEVEL; default "info")
  --verbose-mode
        talk
        (env EA_VERBOSE_MODE; default off)
  --id ID
        an id
        (env EA_ID; default empty)
`
	if b.String() != want {
		t.Errorf("WriteFlags:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestChecks(t *testing.T) {
	var lvl slog.Level
	for v, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "Warn": slog.LevelWarn, "error": slog.LevelError} {
		if msg := LogLevel(v, &lvl); msg != "" || lvl != want {
			t.Errorf("LogLevel(%q) = %v, %q; want %v", v, lvl, msg, want)
		}
	}
	var f string
	if msg := LogFormat("JSON", &f); msg != "" || f != "json" {
		t.Errorf("LogFormat(JSON) = %q, %q", f, msg)
	}
	if msg := LogFormat("xml", &f); msg != "want text or json" {
		t.Errorf("LogFormat(xml) = %q", msg)
	}
	var p string
	if msg := Prefix("ea2", &p); msg != "" || p != "ea2" {
		t.Errorf("Prefix(ea2) = %q, %q", p, msg)
	}
	for _, bad := range []string{"", "a.b", "a b"} {
		if msg := Prefix(bad, &p); msg != "want one subject token: 1-128 characters of A-Z a-z 0-9 _ -" {
			t.Errorf("Prefix(%q) = %q", bad, msg)
		}
	}
	m := "x"
	for _, off := range []string{"", "off"} {
		if msg := Metrics(off, "h:1", &m); msg != "" || m != "" {
			t.Errorf("Metrics(%q) = %q, %q", off, m, msg)
		}
	}
	if msg := Metrics(":9", "h:1", &m); msg != "" || m != ":9" {
		t.Errorf("Metrics(:9) = %q, %q", m, msg)
	}
	if msg := Metrics("9464", "h:1", &m); msg != `want host:port, e.g. h:1, or "off" (or empty) to disable` {
		t.Errorf("Metrics(9464) = %q", msg)
	}
	for v, want := range map[string]bool{"127.0.0.1:0": true, ":65535": true, "[::1]:80": true, "h:65536": false, "h:-1": false, "h": false, "h:x": false} {
		if IsHostPort(v) != want {
			t.Errorf("IsHostPort(%q) = %v", v, !want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{Usagef("--x %q: no", "y"), 2, "prog: --x \"y\": no\nRun prog -h for the flags.\n"},
		{errors.Join(errors.New("wrapped"), Usagef("bad")), 2, "prog: wrapped\nbad\nRun prog -h for the flags.\n"},
		{errors.New("boom"), 1, "prog: boom\n"},
	} {
		var b strings.Builder
		if code := ExitStatus("prog", tc.err, &b); code != tc.code || b.String() != tc.msg {
			t.Errorf("ExitStatus(%v) = %d, %q; want %d, %q", tc.err, code, b.String(), tc.code, tc.msg)
		}
	}
}

func TestNewLogger(t *testing.T) {
	var b bytes.Buffer
	log := NewLogger(slog.LevelWarn, "json", &b)
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if got := b.String(); !strings.HasPrefix(got, "{") || !strings.Contains(got, `"msg":"shown","k":1`) || strings.Contains(got, "hidden") {
		t.Errorf("json logger wrote %q", got)
	}
	b.Reset()
	NewLogger(slog.LevelDebug, "text", &b).Debug("seen")
	if got := b.String(); !strings.Contains(got, "level=DEBUG msg=seen") {
		t.Errorf("text logger wrote %q", got)
	}
}

func TestNewRegistry(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var goroutines bool
	for _, mf := range mfs {
		goroutines = goroutines || mf.GetName() == "go_goroutines"
	}
	if !goroutines {
		t.Error("registry has no go_goroutines")
	}
}

type flagState struct{ atomic.Bool }

func (f *flagState) Ready() bool     { return f.Load() }
func (f *flagState) Connected() bool { return f.Load() }

func TestReadiness(t *testing.T) {
	for _, require := range []bool{false, true} {
		r := NewReadiness("starting")
		r.RequireConnected = require
		check := func(wantOK bool, wantReason string) {
			t.Helper()
			if ok, reason := r.Check(); ok != wantOK || reason != wantReason {
				t.Errorf("RequireConnected=%v: Check() = %v, %q; want %v, %q", require, ok, reason, wantOK, wantReason)
			}
		}
		check(false, "starting")
		r.Set("provisioning")
		check(false, "provisioning")
		var conn, target flagState
		conn.Store(true)
		r.Attach(&conn, &target, "attaching")
		check(false, "attaching")
		target.Store(true)
		check(true, "ready")
		conn.Store(false)
		if require {
			check(false, "NATS connection down; reconnecting")
		} else {
			check(true, "ready")
		}
		target.Store(false)
		check(false, "NATS connection down; reconnecting")
		r.Set(ShuttingDown)
		check(false, ShuttingDown)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestStartMetrics(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := NewLogger(slog.LevelInfo, "text", &logs)
	r := NewReadiness("warming up")
	m, err := StartMetrics("prog", "0.0.0.0:0", reg, r.Live, r.Check, log)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + Reachable(m.Addr())
	if !strings.HasPrefix(base, "http://127.0.0.1:") || strings.HasSuffix(base, ":0") {
		t.Fatalf("reachable address %s", base)
	}
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"/healthz", "ok\n", 200},
		{"/readyz", "warming up\n", 503},
		{"/", "prog: /metrics /healthz /readyz\n", 200},
		{"/nothing", "404 page not found\n", 404},
	} {
		if code, body := get(t, base+tc.path); code != tc.code || body != tc.body {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	var ready flagState
	ready.Store(true)
	r.Attach(nil, &ready, "x")
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("GET /readyz when ready = %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("GET /metrics = %d, no go_goroutines", code)
	}
	// The same address again is busy.
	_, err = StartMetrics("prog", m.Addr(), reg, r.Live, r.Check, log)
	if err == nil || !strings.HasPrefix(err.Error(), "--metrics "+m.Addr()+": ") ||
		!strings.HasSuffix(err.Error(), "(is another prog running? choose another address with --metrics, or --metrics off)") {
		t.Errorf("second StartMetrics on %s: %v", m.Addr(), err)
	}
	m.Shutdown(log)
	if !strings.Contains(logs.String(), `msg="serving metrics" url=http://127.0.0.1:`) {
		t.Errorf("logs: %s", logs.String())
	}
	if _, err := net.DialTimeout("tcp", Reachable(m.Addr()), time.Second); err == nil {
		t.Error("metrics server still listening after Shutdown")
	}
	if _, err := StartMetrics("prog", "127.0.0.1:0", reg, r.Live, nil, log); err == nil {
		t.Error("StartMetrics with a nil check succeeded")
	}
}

func TestReachable(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:80": "127.0.0.1:80", "[::]:80": "127.0.0.1:80", ":80": "127.0.0.1:80",
		"10.0.0.1:80": "10.0.0.1:80", "[::1]:9": "[::1]:9", "nonsense": "nonsense",
	} {
		if got := Reachable(in); got != want {
			t.Errorf("Reachable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRunAnnounced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var announced atomic.Int32
	announcedCh := make(chan struct{})
	errStop := errors.New("stopped")
	run := func(ctx context.Context) error {
		select { // run until the announcement, as a server would
		case <-announcedCh:
		case <-ctx.Done():
		}
		return errStop
	}
	err := RunAnnounced(ctx, run, func() bool { return true }, func() { announced.Add(1); close(announcedCh) })
	if !errors.Is(err, errStop) || announced.Load() != 1 {
		t.Errorf("RunAnnounced = %v, announced %d times; want %v, once", err, announced.Load(), errStop)
	}

	// run ends before ready: no announcement.
	announced.Store(0)
	err = RunAnnounced(ctx, func(context.Context) error { return nil }, func() bool { return false }, func() { announced.Add(1) })
	if err != nil || announced.Load() != 0 {
		t.Errorf("RunAnnounced never ready = %v, announced %d times", err, announced.Load())
	}

	// ctx ends before ready: WaitReady gives up.
	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	if WaitReady(ended, nil, func() bool { return false }) {
		t.Error("WaitReady with an ended ctx reported ready")
	}
	if !WaitReady(ended, nil, func() bool { return true }) {
		t.Error("WaitReady with a ready target reported not ready")
	}
}

type closer struct{ err error }

func (c closer) Close() error { return c.err }

func TestCloseConn(t *testing.T) {
	var b bytes.Buffer
	log := NewLogger(slog.LevelInfo, "text", &b)
	CloseConn(closer{}, log)
	if b.Len() != 0 {
		t.Errorf("clean close logged %q", b.String())
	}
	CloseConn(closer{errors.New("gone")}, log)
	if !strings.Contains(b.String(), `level=WARN msg="close NATS connection" err=gone`) {
		t.Errorf("failed close logged %q", b.String())
	}
}

type logCfg struct{ level slog.Level }

func (c logCfg) Logging() (slog.Level, string) { return c.level, "json" }

func TestRun(t *testing.T) {
	parse := func(args []string, getenv func(string) string) (logCfg, error) {
		var c logCfg
		_, err := Parse("prog", []*Setting[logCfg]{LogLevelSetting(func(c *logCfg) *slog.Level { return &c.level })}, args, getenv, &c)
		return c, err
	}
	usage := func() string { return "USAGE\n" }
	var served logCfg
	serve := func(_ context.Context, cfg logCfg, log *slog.Logger, stdout io.Writer) error {
		served = cfg
		log.Debug("hello")
		_, err := io.WriteString(stdout, "served\n")
		return err
	}
	var out, errOut strings.Builder
	if err := Run(context.Background(), []string{"--log-level", "debug"}, envOf(nil), &out, &errOut, parse, usage, serve); err != nil {
		t.Fatal(err)
	}
	if served.level != slog.LevelDebug || out.String() != "served\n" || !strings.Contains(errOut.String(), `"msg":"hello"`) {
		t.Errorf("Run served %+v, stdout %q, stderr %q", served, out.String(), errOut.String())
	}
	out.Reset()
	if err := Run(context.Background(), []string{"-h"}, envOf(nil), &out, &errOut, parse, usage, serve); err != nil || out.String() != "USAGE\n" {
		t.Errorf("Run -h = %v, stdout %q", err, out.String())
	}
	out.Reset()
	var ue *UsageError
	if err := Run(context.Background(), []string{"--log-level", "x"}, envOf(nil), &out, &errOut, parse, usage, serve); !errors.As(err, &ue) || out.Len() != 0 {
		t.Errorf("Run with a bad flag = %v, stdout %q", err, out.String())
	}
}

func TestStartProcess(t *testing.T) {
	log := NewLogger(slog.LevelError, "text", io.Discard)
	p, err := StartProcess(ProcessOptions{Program: "prog", Reason: "booting", RequireConnected: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if p.Metrics != nil || p.Registry == nil || !p.State.RequireConnected {
		t.Errorf("StartProcess without metrics = %+v", p)
	}
	if ok, reason := p.State.Check(); ok || reason != "booting" {
		t.Errorf("Check = %v %q", ok, reason)
	}
	p.Close()
	p, err = StartProcess(ProcessOptions{Program: "prog", Metrics: "127.0.0.1:0", Reason: "booting", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, "http://"+p.Metrics.Addr()+"/readyz"); code != 503 || body != "booting\n" {
		t.Errorf("GET /readyz = %d %q", code, body)
	}
	p.Close()
	if _, err := StartProcess(ProcessOptions{Program: "prog"}); err == nil {
		t.Error("StartProcess without a logger succeeded")
	}
}

func TestUsage(t *testing.T) {
	got := Usage("Usage: prog\n\n", testSettings()[:1], "serving")
	want := `Usage: prog

Every flag can be set by its environment variable instead; a flag wins.

Flags:
  --name NAME
        who
        (env EA_NAME; default "anon")
  -h, --help
        print this help

Endpoints on --metrics: /metrics (Prometheus), /healthz (200 while running),
/readyz (200 once connected, provisioned and serving; else 503).

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 on failure, 2 for
a bad flag or environment value.
`
	if got != want {
		t.Errorf("Usage:\n%s\nwant\n%s", got, want)
	}
}

func TestSharedSettings(t *testing.T) {
	type c struct {
		level          slog.Level
		format, metric string
	}
	s := []*Setting[c]{
		LogLevelSetting(func(x *c) *slog.Level { return &x.level }),
		LogFormatSetting(func(x *c) *string { return &x.format }),
		MetricsSetting("127.0.0.1:1", func(x *c) *string { return &x.metric }),
	}
	var cfg c
	if _, err := Parse("prog", s, nil, envOf(nil), &cfg); err != nil || cfg != (c{slog.LevelInfo, "text", "127.0.0.1:1"}) {
		t.Errorf("defaults = %+v, %v", cfg, err)
	}
	_, err := Parse("prog", s, []string{"--metrics", "x"}, envOf(nil), &cfg)
	if err == nil || err.Error() != `--metrics "x": want host:port, e.g. 127.0.0.1:1, or "off" (or empty) to disable` {
		t.Errorf("bad --metrics: %v", err)
	}
	var d time.Duration
	if msg := PositiveDuration("1m", &d, "no"); msg != "" || d != time.Minute {
		t.Errorf("PositiveDuration(1m) = %v %q", d, msg)
	}
	for _, bad := range []string{"0s", "-1s", "x"} {
		if msg := PositiveDuration(bad, &d, "no"); msg != "no" {
			t.Errorf("PositiveDuration(%q) = %q", bad, msg)
		}
	}
}

// lostConn is a connection that is up, or lost for good with an error.
type lostConn struct {
	flagState
	lost chan struct{}
	err  error
}

func (c *lostConn) Connected() bool       { return c.Load() }
func (c *lostConn) Lost() <-chan struct{} { return c.lost }
func (c *lostConn) Err() error {
	select {
	case <-c.lost:
		return c.err
	default:
		return nil
	}
}

// TestLiveWhenLost: once NATS closes the connection for good, /healthz and
// /readyz answer 503 with the reason, and UntilLost's context ends.
func TestLiveWhenLost(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	log := NewLogger(slog.LevelError, "text", io.Discard)
	r := NewReadiness("starting")
	m, err := StartMetrics("prog", "127.0.0.1:0", reg, r.Live, r.Check, log)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(log)
	base := "http://" + m.Addr()
	conn := &lostConn{lost: make(chan struct{}), err: errors.New("nats closed the connection for good")}
	conn.Store(true)
	var target flagState
	target.Store(true)
	r.Attach(conn, &target, "x")
	ctx, stop := UntilLost(context.Background(), conn)
	defer stop()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("GET /healthz while connected = %d", code)
	}
	if ctx.Err() != nil {
		t.Fatal("UntilLost's context ended while connected")
	}
	conn.Store(false)
	close(conn.lost)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, base+path); code != 503 || body != conn.err.Error()+"\n" {
			t.Errorf("GET %s when lost = %d %q, want 503 and the reason", path, code, body)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("UntilLost's context did not end when the connection was lost")
	}
}

// stateOf is a connection in the state it holds.
type stateOf struct{ s string }

func (c *stateOf) State() string { return c.s }

func TestConnStateCollector(t *testing.T) {
	conn := &stateOf{"connected"}
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewConnStateCollector(conn, []string{"connected", "reconnecting", "closed"})); err != nil {
		t.Fatal(err)
	}
	for _, now := range []string{"connected", "reconnecting", "closed"} {
		conn.s = now
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		for _, s := range []string{"connected", "reconnecting", "closed"} {
			if want := map[bool]float64{true: 1}[s == now]; got[s] != want {
				t.Errorf("in state %s: ea_nats_connection_state{state=%q} = %v, want %v", now, s, got[s], want)
			}
		}
	}
}
