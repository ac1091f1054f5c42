package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Logging is a configuration that says how to log (see [Run]).
type Logging interface {
	// Logging returns the least severe level logged and the format, "text"
	// or "json".
	Logging() (slog.Level, string)
}

// Run is the start of every binary's run: it reads the configuration with
// parse and calls serve with it, a logger to stderr built from it and
// stdout. For -h or --help it writes usage() to stdout instead and returns
// the write's error; a bad configuration returns parse's error (a
// *UsageError) without calling serve.
func Run[C Logging](ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer,
	parse func([]string, func(string) string) (C, error), usage func() string,
	serve func(ctx context.Context, cfg C, log *slog.Logger, stdout io.Writer) error) error {
	cfg, err := parse(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		_, err = io.WriteString(stdout, usage())
		return err
	}
	if err != nil {
		return err
	}
	level, format := cfg.Logging()
	return serve(ctx, cfg, NewLogger(level, format, stderr), stdout)
}

// ProcessOptions configure [StartProcess].
type ProcessOptions struct {
	Program string // the binary's name in messages, e.g. "ea-node"
	Metrics string // address of /metrics, /healthz and /readyz; empty: none
	// Reason is why the process is not ready at first.
	Reason string
	// RequireConnected is the Readiness's: a connection that is down makes
	// the process not ready even if its target says it is ready.
	RequireConnected bool
	Log              *slog.Logger
}

// Process is what a binary sets up before it connects to NATS: its metrics
// registry, its readiness and, unless its options have no Metrics address,
// the server of /metrics, /healthz and /readyz.
type Process struct {
	Registry *prometheus.Registry
	State    *Readiness
	Metrics  *MetricsServer // nil without a metrics address
	log      *slog.Logger
}

// StartProcess logs the program's start with its [Version], builds the
// registry (see [NewRegistry], with [BuildInfo]) and the readiness, and
// binds and starts the metrics server, so that a busy address fails before
// anything else starts. Close stops the server.
func StartProcess(o ProcessOptions) (*Process, error) {
	if o.Program == "" || o.Log == nil {
		return nil, errors.New("cli.StartProcess: Program and Log must be set")
	}
	o.Log.Info("starting", "program", o.Program, "version", Version())
	reg, err := NewRegistry()
	if err != nil {
		return nil, err
	}
	if err := reg.Register(BuildInfo(o.Program)); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	p := &Process{Registry: reg, State: NewReadiness(o.Reason), log: o.Log}
	p.State.RequireConnected = o.RequireConnected
	if o.Metrics != "" {
		if p.Metrics, err = StartMetrics(o.Program, o.Metrics, reg, p.State.Live, p.State.Check, o.Log); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Close stops the metrics server, if any (see [MetricsServer.Shutdown]).
func (p *Process) Close() {
	if p.Metrics != nil {
		p.Metrics.Shutdown(p.log)
	}
}

// CloseConn closes conn (the NATS connection), logging a failure as a
// warning; it is for a defer.
func CloseConn(conn interface{ Close() error }, log *slog.Logger) {
	if err := conn.Close(); err != nil {
		log.Warn("close NATS connection", "err", err)
	}
}
