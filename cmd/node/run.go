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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/kinds"
	"github.com/effectors/effectors/records"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// run is the whole of ea-node: it reads the configuration from args and
// getenv, connects (or embeds NATS), provisions, hosts the example kinds and
// runs until ctx ends, then shuts down gracefully. It prints the usage for
// -h and a hint of what to try once ready to stdout; it logs to stderr. A
// clean shutdown returns nil; a bad flag or environment value a
// *usageError.
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
	if cfg.NATS != "" {
		for _, name := range []string{"listen", "store", "sync-always"} {
			if cfg.explicit[name] {
				log.Warn("--" + name + " is ignored with --nats: it configures the embedded server")
			}
		}
	}

	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}

	state := &readiness{reason: "connecting to NATS"}
	if cfg.NATS == "" {
		state.reason = "starting the embedded NATS server"
	}
	var metrics *metricsServer
	if cfg.Metrics != "" {
		// Bound first, so that a busy address fails before anything starts.
		if metrics, err = startMetrics(cfg.Metrics, reg, state, log); err != nil {
			return err
		}
		defer metrics.shutdown(log)
	}

	conn, err := bus.Connect(ctx, bus.Config{
		URL:        cfg.NATS,
		Listen:     cfg.Listen,
		StoreDir:   cfg.Store,
		SyncAlways: cfg.SyncAlways,
		Prefix:     cfg.Prefix,
		Name:       "ea-node",
		Replicas:   cfg.Replicas,
		Logger:     log,
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while connecting to NATS")
			return nil
		}
		return err
	}
	defer func() {
		if err := conn.Close(); err != nil {
			log.Warn("close NATS connection", "err", err)
		}
	}()

	state.set("provisioning streams and buckets")
	if err := conn.Provision(ctx); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while provisioning")
			return nil
		}
		return err
	}

	node, err := actor.NewNode(conn, cfg.actorOptions(log, reg))
	if err != nil {
		return err
	}
	// task-a and task-b are the workers of ea-supervisor's demo orchestration.
	if err := node.Host(kinds.Counter(), kinds.Controller(), kinds.TaskA(), kinds.TaskB()); err != nil {
		return err
	}
	state.attach(conn, node, "attaching effectors and starting control endpoints")

	announced := make(chan struct{})
	runDone := make(chan struct{})
	go func() {
		defer close(announced)
		if waitReady(ctx, runDone, node) {
			_, _ = io.WriteString(stdout, hint(conn, node, metrics, cfg.Store))
		}
	}()
	err = node.Run(ctx)
	close(runDone)
	<-announced
	state.set("shutting down")
	if err != nil && ctx.Err() != nil {
		log.Info("stopped before ready", "err", err)
		return nil
	}
	return err
}

// waitReady waits until node is ready, reporting false if ctx ends or the
// node stops first.
func waitReady(ctx context.Context, done <-chan struct{}, node *actor.Node) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !node.Ready() {
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

// exitStatus reports err on stderr and returns the process exit status: 0
// for nil, 2 for a usage error, 1 otherwise.
func exitStatus(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ea-node: %v\nRun ea-node -h for the flags.\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "ea-node: %v\n", err)
		return 1
	}
}

// readiness is what /readyz answers: ready once the node says so, else the
// phase the process is in.
type readiness struct {
	mu     sync.Mutex
	reason string
	conn   *bus.Conn
	node   *actor.Node
}

func (r *readiness) set(reason string) {
	r.mu.Lock()
	r.reason = reason
	r.mu.Unlock()
}

func (r *readiness) attach(conn *bus.Conn, node *actor.Node, reason string) {
	r.mu.Lock()
	r.conn, r.node, r.reason = conn, node, reason
	r.mu.Unlock()
}

// check reports whether the node is ready, and if not, why.
func (r *readiness) check() (bool, string) {
	r.mu.Lock()
	conn, node, reason := r.conn, r.node, r.reason
	r.mu.Unlock()
	switch {
	case node != nil && node.Ready():
		return true, "ready"
	case conn != nil && !conn.Connected() && reason != "shutting down":
		return false, "NATS connection down; reconnecting"
	}
	return false, reason
}

// metricsServer serves /metrics, /healthz and /readyz.
type metricsServer struct {
	srv  *http.Server
	addr string // the address bound, port resolved
	done chan struct{}
}

func startMetrics(addr string, reg *prometheus.Registry, state *readiness, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w (is another ea-node running? choose another address with --metrics, or --metrics off)", addr, err)
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
		_, _ = io.WriteString(w, "ea-node: /metrics /healthz /readyz\n")
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

// shutdown stops the server, letting requests in flight finish for up to 5s.
func (m *metricsServer) shutdown(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		log.Warn("metrics server shutdown", "err", err)
		_ = m.srv.Close()
	}
	<-m.done
}

// reachable turns a bound address into one a local client can dial: an
// unspecified host (0.0.0.0, ::, empty) becomes 127.0.0.1.
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

// hint is what ea-node prints once ready: what to try, with the real URL and
// prefix.
func hint(conn *bus.Conn, node *actor.Node, metrics *metricsServer, store string) string {
	url := conn.ClientURL()
	where := "NATS server"
	if srv := conn.Server(); srv != nil {
		url = "nats://" + reachable(srv.Addr())
		where = "embedded NATS server, store " + store
	}
	n := conn.Names()
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	ctl := records.Ref{Kind: "controller", ID: "ctl"}
	ks := node.Kinds()
	slices.Sort(ks)

	var b strings.Builder
	fmt.Fprintf(&b, "\nea-node is ready: kinds %s, prefix %q\n", strings.Join(ks, ", "), n.Prefix())
	fmt.Fprintf(&b, "  NATS     %s (%s)\n", url, where)
	if metrics != nil {
		fmt.Fprintf(&b, "  metrics  http://%s/metrics (and /healthz, /readyz)\n", reachable(metrics.addr))
	}
	b.WriteString("\nTry it with the nats CLI (https://github.com/nats-io/natscli):\n")
	fmt.Fprintf(&b, "  export NATS_URL=%s\n", url)
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"c1\"}'\n", n.Control("create", c1.Kind))
	fmt.Fprintf(&b, "  nats sub '%s'    # in another terminal: what c1 emits\n", n.Outbox(c1))
	fmt.Fprintf(&b, "  nats pub %s '{\"by\":2}' -H EA-Type:inc -H Content-Type:application/json\n", n.Mailbox(c1))
	fmt.Fprintf(&b, "  nats kv get %s %s    # c1's state document (the value is msgpack)\n", n.StateBucket(), n.StateKey(c1))
	fmt.Fprintf(&b, "  nats req %s '{\"id\":\"ctl\"}'\n", n.Control("create", ctl.Kind))
	fmt.Fprintf(&b, "  nats pub %s '{\"counter\":\"c1\",\"times\":100}' -H EA-Type:start -H Content-Type:application/json\n", n.Mailbox(ctl))
	if metrics != nil {
		fmt.Fprintf(&b, "  curl -s http://%s/metrics | grep ea_\n", reachable(metrics.addr))
	}
	b.WriteString("\n")
	return b.String()
}
