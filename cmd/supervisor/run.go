package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/supervisor"
)

// serve runs ea-supervisor with its configuration until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	// A supervisor is not ready while its NATS connection is down, even if
	// its service still runs.
	proc, err := cli.StartProcess(cli.ProcessOptions{
		Program: "ea-supervisor", Metrics: cfg.Metrics, Log: log,
		Reason: "connecting to NATS at " + cfg.NATS, RequireConnected: true,
	})
	if err != nil {
		return err
	}
	defer proc.Close()
	state, metrics := proc.State, proc.Metrics

	conn, err := bus.Connect(ctx, bus.Config{
		URL: cfg.NATS, Prefix: cfg.Prefix, Name: "ea-supervisor", Logger: log,
		ConnectTimeout: cfg.ConnectTimeout, Retention: cfg.Retention,
	})
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while connecting to NATS")
			return nil
		}
		return fmt.Errorf("%w (is ea-node running? start it with make run, or point --nats at your NATS)", err)
	}
	defer cli.CloseConn(conn, log)
	state.Set("provisioning streams and buckets")
	if err := conn.Provision(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	sup, err := supervisor.New(conn, supervisor.Options{Logger: log, Registerer: proc.Registry})
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
	state.Attach(conn, sup, "starting the orchestration service")

	err = cli.RunAnnounced(ctx, sup.Run, sup.Ready, func() {
		_, _ = io.WriteString(stdout, hint(conn, metrics))
	})
	state.Set(cli.ShuttingDown)
	return err
}

// hint is what ea-supervisor prints once ready: how to start and watch the
// demo, with the real URL and prefix.
func hint(conn *bus.Conn, metrics *cli.MetricsServer) string {
	n := conn.Names()
	p := n.Prefix()
	var b strings.Builder
	fmt.Fprintf(&b, "\nea-supervisor is ready: orchestration %q, prefix %q\n", supervisor.DemoName, p)
	fmt.Fprintf(&b, "  NATS     %s\n", conn.ClientURL())
	if metrics != nil {
		fmt.Fprintf(&b, "  metrics  http://%s/metrics (and /healthz, /readyz)\n", cli.Reachable(metrics.Addr()))
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
		fmt.Fprintf(&b, "  curl -s http://%s/metrics | grep ea_orch\n", cli.Reachable(metrics.Addr()))
	}
	b.WriteString("\n")
	return b.String()
}
