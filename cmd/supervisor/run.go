package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// run is the whole of ea-supervisor: it reads the configuration, connects
// to NATS, provisions, runs the supervisor with the demo orchestration until
// ctx ends. It prints the usage for -h and, once ready, a hint of how to
// start and watch the demo to stdout; it logs to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		_, err = io.WriteString(stdout, usage())
		return err
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)

	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	state := &readiness{reason: "connecting to NATS at " + cfg.NATS}
	var metrics *metricsServer
	if cfg.Metrics != "" {
		if metrics, err = startMetrics(cfg.Metrics, reg, state, log); err != nil {
			return err
		}
		defer metrics.shutdown(log)
	}

	conn, err := bus.Connect(ctx, bus.Config{
		URL: cfg.NATS, Prefix: cfg.Prefix, Name: "ea-supervisor", Logger: log,
		ConnectTimeout: cfg.ConnectTimeout,
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while connecting to NATS")
			return nil
		}
		return fmt.Errorf("%w (is ea-node running? start it with make run, or point --nats at your NATS)", err)
	}
	defer func() {
		if err := conn.Close(); err != nil {
			log.Warn("close NATS connection", "err", err)
		}
	}()
	state.set("provisioning streams and buckets")
	if err := conn.Provision(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	sup, err := supervisor.New(conn, supervisor.Options{Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	demo, err := supervisor.Demo()
	if err != nil {
		return err
	}
	if err := sup.Register(demo); err != nil {
		return err
	}
	state.attach(conn, sup, "starting the orchestration service")

	announced := make(chan struct{})
	runDone := make(chan struct{})
	go func() {
		defer close(announced)
		if waitReady(ctx, runDone, sup) {
			_, _ = io.WriteString(stdout, hint(conn, metrics))
		}
	}()
	err = sup.Run(ctx)
	close(runDone)
	<-announced
	state.set("shutting down")
	return err
}

func waitReady(ctx context.Context, done <-chan struct{}, sup *supervisor.Supervisor) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !sup.Ready() {
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

func newLogger(cfg config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// exitStatus reports err on stderr and returns the exit status.
func exitStatus(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ea-supervisor: %v\nRun ea-supervisor -h for the flags.\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "ea-supervisor: %v\n", err)
		return 1
	}
}

// readiness is what /readyz answers.
type readiness struct {
	mu     sync.Mutex
	reason string
	conn   *bus.Conn
	sup    *supervisor.Supervisor
}

func (r *readiness) set(reason string) {
	r.mu.Lock()
	r.reason = reason
	r.mu.Unlock()
}

func (r *readiness) attach(conn *bus.Conn, sup *supervisor.Supervisor, reason string) {
	r.mu.Lock()
	r.conn, r.sup, r.reason = conn, sup, reason
	r.mu.Unlock()
}

func (r *readiness) check() (bool, string) {
	r.mu.Lock()
	conn, sup, reason := r.conn, r.sup, r.reason
	r.mu.Unlock()
	switch {
	case conn != nil && !conn.Connected() && reason != "shutting down":
		return false, "NATS connection down; reconnecting"
	case sup != nil && sup.Ready():
		return true, "ready"
	}
	return false, reason
}

// metricsServer serves /metrics, /healthz and /readyz.
type metricsServer struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

func startMetrics(addr string, reg *prometheus.Registry, state *readiness, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w (is another ea-supervisor running? choose another address with --metrics, or --metrics off)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, reason := state.check()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, reason+"\n")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ea-supervisor: /metrics /healthz /readyz\n")
	})
	m := &metricsServer{
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
	log.Info("serving metrics", "url", "http://"+reachable(m.addr)+"/metrics")
	return m, nil
}

func (m *metricsServer) shutdown(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		log.Warn("metrics server shutdown", "err", err)
		_ = m.srv.Close()
	}
	<-m.done
}

func reachable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// hint is what ea-supervisor prints once ready: how to start and watch the
// demo, with the real URL and prefix.
func hint(conn *bus.Conn, metrics *metricsServer) string {
	n := conn.Names()
	p := n.Prefix()
	var b strings.Builder
	fmt.Fprintf(&b, "\nea-supervisor is ready: orchestration %q, prefix %q\n", supervisor.DemoName, p)
	fmt.Fprintf(&b, "  NATS     %s\n", conn.ClientURL())
	if metrics != nil {
		fmt.Fprintf(&b, "  metrics  http://%s/metrics (and /healthz, /readyz)\n", reachable(metrics.addr))
	}
	b.WriteString("\nRun the demo with the nats CLI (https://github.com/nats-io/natscli); it needs\nan ea-node hosting task-a and task-b on the same NATS (make run starts both):\n")
	fmt.Fprintf(&b, "  export NATS_URL=%s\n", conn.ClientURL())
	fmt.Fprintf(&b, "  nats req %s '{\"name\":\"demo\",\"input\":{\"text\":\"hello world\"}}'   # -> {\"id\":\"<ID>\"}\n", supervisor.Subject(p, supervisor.OpStart))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'     # WAITING for input, with task A's result\n", supervisor.Subject(p, supervisor.OpStatus))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\",\"input\":{\"note\":\"from me\"}}'\n", supervisor.Subject(p, supervisor.OpInput))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'     # COMPLETED, with both tasks' results\n", supervisor.Subject(p, supervisor.OpStatus))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"<ID>\"}'     # or cancel it while it waits\n", supervisor.Subject(p, supervisor.OpCancel))
	fmt.Fprintf(&b, "  nats sub '%s.mbox.supervisor.>'   # watch results arrive; '%s.mbox.*.demo' the tasks\n", p, p)
	b.WriteString("  Try {\"text\":\"hello world\",\"fail_a\":2} (a retry) or \"fail_a\":9 (the alternative path).\n")
	if metrics != nil {
		fmt.Fprintf(&b, "  curl -s http://%s/metrics | grep ea_orch\n", reachable(metrics.addr))
	}
	b.WriteString("\n")
	return b.String()
}
