package cli

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

// Setting is one flag of a configuration C, its environment variable and
// its default.
type Setting[C any] struct {
	Name string // flag name without dashes, e.g. "log-level"
	Arg  string // placeholder in the usage, e.g. "URLS"; empty for a bool flag
	Def  string // default value, as text
	// DefText, when set, is how the usage shows a default that is not a
	// literal value (an empty Def that means "derived" or "random").
	DefText string
	Usage   string
	// Check converts the text into cfg, or returns what is allowed.
	Check func(cfg *C, v string) (want string)
}

// Env is the setting's environment variable: EA_<FLAG>, upper case, dashes
// as underscores.
func (s *Setting[C]) Env() string {
	return "EA_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

// IsBool reports whether the setting is a bool flag (it has no Arg).
func (s *Setting[C]) IsBool() bool { return s.Arg == "" }

// DefaultText is the default as the usage shows it: DefText, "empty" for an
// empty default, else the quoted default.
func (s *Setting[C]) DefaultText() string {
	switch {
	case s.DefText != "":
		return s.DefText
	case s.Def == "":
		return "empty"
	}
	return strconv.Quote(s.Def)
}

// value is a setting's text while parsing; it is a flag.Value.
type value struct {
	text   string
	from   string // "", "flag" or "env"
	isBool bool
}

func (v *value) String() string {
	if v == nil {
		return ""
	}
	return v.text
}

func (v *value) Set(s string) error { v.text, v.from = s, "flag"; return nil }

// IsBoolFlag lets a bool flag stand alone (--sync-always).
func (v *value) IsBoolFlag() bool { return v.isBool }

// Parse reads the settings of program from args and, for settings no flag
// gives, from the environment through getenv (an empty variable counts as
// unset), and checks each into cfg in order. It returns the names of the
// settings given by a flag or the environment rather than left at their
// default. It returns flag.ErrHelp for -h and a *UsageError for bad input.
// When some setting is a bool flag, the message for a stray argument says
// how to give a bool flag its value.
func Parse[C any](program string, settings []*Setting[C], args []string, getenv func(string) string, cfg *C) (explicit map[string]bool, err error) {
	if cfg == nil || getenv == nil {
		return nil, errors.New("cli.Parse: cfg and getenv must not be nil")
	}
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, usage on -h
	fs.Usage = func() {}
	values := make([]*value, len(settings))
	hasBool := false
	for i, s := range settings {
		v := &value{text: s.Def, isBool: s.IsBool()}
		if e := getenv(s.Env()); e != "" {
			v.text, v.from = e, "env"
		}
		hasBool = hasBool || v.isBool
		values[i] = v
		fs.Var(v, s.Name, s.Usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, Usagef("%v", err)
	}
	if fs.NArg() > 0 {
		hint := ""
		if hasBool {
			hint = " (a bool flag takes its value as --flag=false)"
		}
		return nil, Usagef("unexpected argument %q: %s takes flags only%s", bus.RedactURL(fs.Arg(0)), program, hint)
	}
	explicit = map[string]bool{}
	for i, s := range settings {
		v := values[i]
		if want := s.Check(cfg, v.text); want != "" {
			if v.from == "env" {
				return nil, Usagef("--%s %q (from %s): %s", s.Name, bus.RedactURL(v.text), s.Env(), want)
			}
			return nil, Usagef("--%s %q: %s", s.Name, bus.RedactURL(v.text), want)
		}
		if v.from != "" {
			explicit[s.Name] = true
		}
	}
	return explicit, nil
}

// WriteFlags writes the flags section of a usage text: each setting with its
// usage, variable and default.
func WriteFlags[C any](w io.Writer, settings []*Setting[C]) {
	for _, s := range settings {
		head := "  --" + s.Name
		if s.Arg != "" {
			head += " " + s.Arg
		}
		fmt.Fprintf(w, "%s\n        %s\n        (env %s; default %s)\n", head, s.Usage, s.Env(), s.DefaultText())
	}
}

// IsHostPort reports whether v is host:port with a port from 0 to 65535.
func IsHostPort(v string) bool {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// LogLevel checks a --log-level value (debug, info, warn or error, any case)
// into dst, or returns what is allowed.
func LogLevel(v string, dst *slog.Level) (want string) {
	switch strings.ToLower(v) {
	case "debug":
		*dst = slog.LevelDebug
	case "info":
		*dst = slog.LevelInfo
	case "warn":
		*dst = slog.LevelWarn
	case "error":
		*dst = slog.LevelError
	default:
		return "want debug, info, warn or error"
	}
	return ""
}

// LogFormat checks a --log-format value (text or json, any case) into dst,
// lower case, or returns what is allowed.
func LogFormat(v string, dst *string) (want string) {
	switch f := strings.ToLower(v); f {
	case "text", "json":
		*dst = f
		return ""
	}
	return "want text or json"
}

// Prefix checks a --prefix value (one subject token) into dst, or returns
// what is allowed.
func Prefix(v string, dst *string) (want string) {
	if _, err := bus.NewNames(v); err != nil || v == "" {
		return "want one subject token: 1-128 characters of A-Z a-z 0-9 _ -"
	}
	*dst = v
	return ""
}

// Metrics checks a --metrics value into dst: host:port, or empty or "off"
// for no metrics server (dst becomes empty). example is the address the
// message suggests, e.g. 127.0.0.1:9464.
func Metrics(v, example string, dst *string) (want string) {
	if v == "" || v == "off" {
		*dst = ""
		return ""
	}
	if !IsHostPort(v) {
		return `want host:port, e.g. ` + example + `, or "off" (or empty) to disable`
	}
	*dst = v
	return ""
}

// LogLevelSetting is the --log-level setting, checked by [LogLevel] into the
// field of C that field returns.
func LogLevelSetting[C any](field func(*C) *slog.Level) *Setting[C] {
	return &Setting[C]{Name: "log-level", Arg: "LEVEL", Def: "info",
		Usage: "least severe level logged: debug, info, warn or error",
		Check: func(c *C, v string) string { return LogLevel(v, field(c)) }}
}

// LogFormatSetting is the --log-format setting, checked by [LogFormat] into
// the field of C that field returns.
func LogFormatSetting[C any](field func(*C) *string) *Setting[C] {
	return &Setting[C]{Name: "log-format", Arg: "FORMAT", Def: "text",
		Usage: "log format on stderr: text or json",
		Check: func(c *C, v string) string { return LogFormat(v, field(c)) }}
}

// MetricsSetting is the --metrics setting with the default address def,
// checked by [Metrics] into the field of C that field returns.
func MetricsSetting[C any](def string, field func(*C) *string) *Setting[C] {
	return &Setting[C]{Name: "metrics", Arg: "HOST:PORT", Def: def,
		Usage: `address of /metrics, /healthz and /readyz; empty or "off" disables them`,
		Check: func(c *C, v string) string { return Metrics(v, def, field(c)) }}
}

// PositiveDuration checks v, a duration above zero, into dst, or returns
// want, which says what is allowed.
func PositiveDuration(v string, dst *time.Duration, want string) string {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return want
	}
	*dst = d
	return ""
}

// Usage is a binary's -h text: intro (the usage line and what the binary
// does, ending in a blank line), then the flags with their variables and
// defaults (see [WriteFlags]), the endpoints on --metrics and the exit
// statuses. readyWhen completes "/readyz (200 once connected, provisioned
// and ...", e.g. "serving its kinds".
func Usage[C any](intro string, settings []*Setting[C], readyWhen string) string {
	var b strings.Builder
	b.WriteString(intro)
	b.WriteString("Every flag can be set by its environment variable instead; a flag wins.\n\nFlags:\n")
	WriteFlags(&b, settings)
	b.WriteString(`  -h, --help
        print this help

Endpoints on --metrics: /metrics (Prometheus), /healthz (200 while running),
/readyz (200 once connected, provisioned and ` + readyWhen + `; else 503).

Exit status: 0 after a clean shutdown (SIGINT, SIGTERM), 1 on failure, 2 for
a bad flag or environment value.
`)
	return b.String()
}
