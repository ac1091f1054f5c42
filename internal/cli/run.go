package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// RunFunc is the whole of a binary: it reads its configuration from args and
// getenv, runs until ctx ends, prints to stdout and logs to stderr.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments, environment and standard
// streams, and exits with [ExitStatus]. SIGINT or SIGTERM cancels the
// context run gets; a second one kills the process at once.
func Main(program string, run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(ExitStatus(program, err, os.Stderr))
}

// ExitStatus reports err on stderr, prefixed by program, and returns the
// process exit status: 0 for nil, 2 for a *UsageError (with a pointer to
// -h), 1 otherwise.
func ExitStatus(program string, err error, stderr io.Writer) int {
	var ue *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nRun %s -h for the flags.\n", program, err, program)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
		return 1
	}
}

// NewLogger returns a logger writing to w at level and above, as JSON when
// format is "json", else as text.
func NewLogger(level slog.Level, format string, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// NewRegistry returns a Prometheus registry with the Go and process
// collectors registered.
func NewRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return reg, nil
}

// RunAnnounced calls run(ctx) and, once ready reports true while run is
// still going (polled every 20ms), calls announce once. It returns run's
// error after announce, if it was called, has returned.
func RunAnnounced(ctx context.Context, run func(context.Context) error, ready func() bool, announce func()) error {
	announced := make(chan struct{})
	runDone := make(chan struct{})
	go func() {
		defer close(announced)
		if WaitReady(ctx, runDone, ready) {
			announce()
		}
	}()
	err := run(ctx)
	close(runDone)
	<-announced
	return err
}

// WaitReady waits until ready reports true, polling every 20ms; it reports
// false if ctx ends or done is closed first.
func WaitReady(ctx context.Context, done <-chan struct{}, ready func() bool) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return false
		case <-done:
			return false
		case <-t.C:
		}
	}
	return true
}

// ShuttingDown is the readiness reason while the process stops; a NATS
// connection that is down then is expected and not reported.
const ShuttingDown = "shutting down"

// Connected is what a Readiness asks of the NATS connection (*bus.Conn).
type Connected interface{ Connected() bool }

// Ready is what a Readiness asks of what the process serves (a node, a
// supervisor).
type Ready interface{ Ready() bool }

// Readiness is what /readyz answers: ready once the attached target says so,
// else the phase the process is in, or that the NATS connection is down.
// Its methods are safe for concurrent use.
type Readiness struct {
	// RequireConnected, when true, reports "not ready" while the attached
	// connection is down even if the target says it is ready; when false a
	// ready target wins.
	RequireConnected bool

	mu     sync.Mutex
	reason string
	conn   Connected
	target Ready
}

// NewReadiness returns a Readiness that is not ready for reason.
func NewReadiness(reason string) *Readiness { return &Readiness{reason: reason} }

// Set changes the reason given while not ready.
func (r *Readiness) Set(reason string) {
	r.mu.Lock()
	r.reason = reason
	r.mu.Unlock()
}

// Attach sets the connection and the target whose readiness counts, and
// the reason given while the target is not ready yet.
func (r *Readiness) Attach(conn Connected, target Ready, reason string) {
	r.mu.Lock()
	r.conn, r.target, r.reason = conn, target, reason
	r.mu.Unlock()
}

// Lost is what liveness asks of the NATS connection (*bus.Conn): Err is
// non-nil once NATS has closed it for good.
type Lost interface{ Err() error }

// Live reports whether the process can still work, and if not, why: false
// once the attached connection implements [Lost] and says it is lost for
// good. /healthz answers it.
func (r *Readiness) Live() (bool, string) {
	r.mu.Lock()
	conn := r.conn
	r.mu.Unlock()
	if l, ok := conn.(Lost); ok {
		if err := l.Err(); err != nil {
			return false, err.Error()
		}
	}
	return true, "ok"
}

// Check reports whether the process is ready, and if not, why.
func (r *Readiness) Check() (bool, string) {
	if ok, why := r.Live(); !ok {
		return false, why
	}
	r.mu.Lock()
	conn, target, reason := r.conn, r.target, r.reason
	r.mu.Unlock()
	if !r.RequireConnected && target != nil && target.Ready() {
		return true, "ready"
	}
	if conn != nil && !conn.Connected() && reason != ShuttingDown {
		return false, "NATS connection down; reconnecting"
	}
	if target != nil && target.Ready() {
		return true, "ready"
	}
	return false, reason
}

// MetricsServer serves /metrics, /healthz and /readyz.
type MetricsServer struct {
	srv  *http.Server
	addr string // the address bound, port resolved
	done chan struct{}
}

// StartMetrics binds addr and serves on it, in the background: /metrics from
// reg, /healthz (200 "ok", or 503 with the reason live gives), /readyz (200,
// or 503, with the reason check gives) and / (a list of the endpoints,
// headed by program). A busy address fails here, before anything else
// starts.
func StartMetrics(program, addr string, reg *prometheus.Registry, live, check func() (bool, string), log *slog.Logger) (*MetricsServer, error) {
	if reg == nil || live == nil || check == nil || log == nil {
		return nil, errors.New("cli.StartMetrics: reg, live, check and log must not be nil")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w (is another %s running? choose another address with --metrics, or --metrics off)", addr, err, program)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, reason := live()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, reason+"\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, reason := check()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, reason+"\n")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, program+": /metrics /healthz /readyz\n")
	})
	m := &MetricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "addr", m.addr, "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+Reachable(m.addr)+"/metrics")
	return m, nil
}

// Addr is the address bound, its port resolved.
func (m *MetricsServer) Addr() string { return m.addr }

// Shutdown stops the server, letting requests in flight finish for up to 5s.
func (m *MetricsServer) Shutdown(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		log.Warn("metrics server shutdown", "err", err)
		_ = m.srv.Close()
	}
	<-m.done
}

// Reachable turns a bound address into one a local client can dial: an
// unspecified host (0.0.0.0, ::, empty) becomes 127.0.0.1.
func Reachable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Conn is what [UntilLost] watches: a NATS connection (*bus.Conn).
type Conn interface {
	Lost() <-chan struct{}
	Err() error
}

// UntilLost returns a context that ends with ctx or as soon as NATS closes
// conn for good, so that everything run under it stops; conn.Err then says
// why, and the process should exit non-zero with it. Call stop when done.
func UntilLost(ctx context.Context, conn Conn) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
		case <-conn.Lost():
			cancel()
		}
	}()
	return ctx, func() { cancel(); <-done }
}
