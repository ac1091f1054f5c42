package scale

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/store"
)

// Child runs one of the child processes the scenarios start, from its
// arguments:
//
//	server -store DIR [-listen ADDR]      a NATS server with JetStream; prints "URL <url>"
//	node -url URL -id ID [-idle D] [-heartbeat D] [-ttl D] [-pprof ADDR]
//	     [-memory-limit SIZE] [-record-store] [-release]
//	                                      a node hosting the counter kind; prints "READY"
//
// The node is configured like ea-node by default: its memory limit is
// ea-node's default (cli.DefaultMemoryLimit; GOMEMLIMIT wins), it returns
// memory once quiet after a burst (cli.ReleaseWhenQuiet) and it serves the
// record store (its indexer reads the mailbox and outbox streams) in the
// same process.
//
// It runs until ctx ends. handled is false when args name neither.
func Child(ctx context.Context, args []string, stdout, stderr io.Writer) (handled bool, err error) {
	if len(args) == 0 || (args[0] != "server" && args[0] != "node") {
		return false, nil
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if args[0] == "server" {
		store := fs.String("store", "./data", "JetStream store directory")
		listen := fs.String("listen", "127.0.0.1:0", "client address")
		pp := fs.String("pprof", "", "serve net/http/pprof on this address")
		if err := fs.Parse(args[1:]); err != nil {
			return true, err
		}
		defer servePprof(*pp)()
		return true, serveNATS(ctx, bus.ServerConfig{Listen: *listen, StoreDir: *store, Logger: log}, stdout)
	}
	url := fs.String("url", "", "NATS URL (required)")
	id := fs.String("id", "", "node id (required)")
	idle := fs.Duration("idle", time.Hour, "idle time before passivation")
	beat := fs.Duration("heartbeat", 0, "heartbeat (0: the default)")
	ttl := fs.Duration("ttl", 0, "heartbeat TTL (0: the default)")
	pp := fs.String("pprof", "", "serve net/http/pprof on this address")
	batch := fs.Int("batch", 0, "the counter kind's MaxBatch (0: its default)")
	memLimit := fs.String("memory-limit", cli.DefaultMemoryLimit, `the Go runtime's soft memory limit, as ea-node's --memory-limit ("off": none; GOMEMLIMIT wins)`)
	recordStore := fs.Bool("record-store", true, "serve the record store (index the log) in the node process, as ea-node does")
	release := fs.Bool("release", true, "return memory to the system once the node is quiet after a burst, as ea-node does (cli.ReleaseWhenQuiet)")
	if err := fs.Parse(args[1:]); err != nil {
		return true, err
	}
	if *url == "" || *id == "" {
		return true, fmt.Errorf("%w: node: -url and -id are required", ErrInvalid)
	}
	var limit int64
	if want := cli.ParseMemoryLimit(*memLimit, &limit); want != "" {
		return true, fmt.Errorf("%w: node: -memory-limit %q: %s", ErrInvalid, *memLimit, want)
	}
	defer cli.ApplyMemoryLimit(limit, os.Getenv("GOMEMLIMIT"), log)()
	if *release {
		defer cli.ReleaseWhenQuiet(ctx, cli.ReleaseOptions{}, log)()
	}
	opts := actor.Options{NodeID: *id, IdleTimeout: *idle, Heartbeat: *beat, HeartbeatTTL: *ttl, Logger: log.With("node", *id)}
	return true, serveNode(ctx, *url, opts, *batch, *recordStore, *pp, stdout)
}

func serveNATS(ctx context.Context, cfg bus.ServerConfig, stdout io.Writer) error {
	srv, err := bus.StartServer(cfg)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	if _, err := fmt.Fprintln(stdout, "URL", srv.ClientURL()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func serveNode(ctx context.Context, url string, opts actor.Options, batch int, recordStore bool, pprofAddr string, stdout io.Writer) error {
	defer servePprof(pprofAddr)()
	conn, err := bus.Connect(ctx, bus.Config{URL: url, Name: "scale-node-" + opts.NodeID})
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.Provision(ctx); err != nil {
		return err
	}
	if recordStore { // as ea-node runs it (node.Command.serve)
		srv, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: opts.Logger})
		if err != nil {
			return err
		}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Run(sctx) }()
		defer func() { stop(); <-done }()
	}
	n, err := actor.NewNode(conn, opts)
	if err != nil {
		return err
	}
	k := kinds.Counter()
	k.MaxBatch = batch
	if err := n.Host(k); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !n.Ready() {
		select {
		case err := <-done:
			return errors.Join(errors.New("node stopped before it was ready"), err)
		case <-t.C:
		}
	}
	if _, err := fmt.Fprintln(stdout, "READY"); err != nil {
		return err
	}
	return <-done
}

// servePprof serves net/http/pprof on addr (nothing when empty) and returns
// the func that stops it.
func servePprof(addr string) (stop func()) {
	if addr == "" {
		return func() {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	hs := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.ListenAndServe() }()
	return func() { _ = hs.Close() }
}
