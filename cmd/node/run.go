package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// serve runs ea-node with its configuration until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	if cfg.NATS != "" {
		for _, name := range []string{"listen", "store", "sync-always"} {
			if cfg.explicit[name] {
				log.Warn("--" + name + " is ignored with --nats: it configures the embedded server")
			}
		}
	}
	reason := "connecting to NATS"
	if cfg.NATS == "" {
		reason = "starting the embedded NATS server"
	}
	proc, err := cli.StartProcess(cli.ProcessOptions{Program: "ea-node", Metrics: cfg.Metrics, Reason: reason, Log: log})
	if err != nil {
		return err
	}
	defer proc.Close()
	state, metrics := proc.State, proc.Metrics

	conn, err := bus.Connect(ctx, bus.Config{
		URL:        cfg.NATS,
		Listen:     cfg.Listen,
		StoreDir:   cfg.Store,
		SyncAlways: cfg.SyncAlways,
		Prefix:     cfg.Prefix,
		Partitions: cfg.Partitions,
		Name:       "ea-node",
		Replicas:   cfg.Replicas,
		Retention:  cfg.Retention,
		Logger:     log,
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while connecting to NATS")
			return nil
		}
		return err
	}
	defer cli.CloseConn(conn, log)

	if cfg.Migrate {
		state.Set("migrating the store to partitioned mailboxes")
		if err := conn.Migrate(ctx); err != nil {
			return err
		}
	}
	state.Set("provisioning streams and buckets")
	if err := conn.Provision(ctx); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while provisioning")
			return nil
		}
		return err
	}

	// The record store: index the log and answer <prefix>.store.* (see docs/store.md).
	if cfg.RecordStore {
		storeSrv, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: log})
		if err != nil {
			return err
		}
		storeCtx, stopStore := context.WithCancel(ctx)
		storeDone := make(chan error, 1)
		go func() {
			err := storeSrv.Run(storeCtx)
			if err != nil {
				log.Error("record store stopped", "err", err)
			}
			storeDone <- err
		}()
		defer func() { stopStore(); <-storeDone }()
	}

	node, err := actor.NewNode(conn, cfg.actorOptions(log, proc.Registry))
	if err != nil {
		return err
	}
	// task-a and task-b are the workers of ea-supervisor's demo orchestration.
	if err := node.Host(kinds.Counter(), kinds.Controller(), kinds.TaskA(), kinds.TaskB()); err != nil {
		return err
	}
	state.Attach(conn, node, "attaching effectors and starting control endpoints")

	err = cli.RunAnnounced(ctx, node.Run, node.Ready, func() {
		_, _ = io.WriteString(stdout, hint(conn, node, metrics, cfg.Store))
	})
	state.Set(cli.ShuttingDown)
	if err != nil && ctx.Err() != nil {
		log.Info("stopped before ready", "err", err)
		return nil
	}
	return err
}

// hint is what ea-node prints once ready: what to try, with the real URL and
// prefix.
func hint(conn *bus.Conn, node *actor.Node, metrics *cli.MetricsServer, store string) string {
	url := conn.ClientURL()
	where := "NATS server"
	if srv := conn.Server(); srv != nil {
		url = "nats://" + cli.Reachable(srv.Addr())
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
		fmt.Fprintf(&b, "  metrics  http://%s/metrics (and /healthz, /readyz)\n", cli.Reachable(metrics.Addr()))
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
		fmt.Fprintf(&b, "  curl -s http://%s/metrics | grep ea_\n", cli.Reachable(metrics.Addr()))
	}
	b.WriteString("\n")
	return b.String()
}
