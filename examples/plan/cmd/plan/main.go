// Command plan runs the plan → review → do example against any
// OpenAI-compatible endpoint, in one process with an embedded NATS server:
//
//	EA_LLM_BASE_URL=http://localhost:11434/v1 EA_LLM_MODEL=llama3.2 \
//	  go run ./examples/plan/cmd/plan "write a haiku about queues"
//
// Environment: EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY (see core/llm).
// Flags: -store (JetStream directory, default a temporary one), -timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/examples/plan"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "plan:", err)
		os.Exit(1)
	}
}

func run() error {
	store := flag.String("store", "", "JetStream store directory (default: a temporary directory)")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long the job may take")
	rounds := flag.Int("rounds", 3, "how many plans the reviewer may send back")
	flag.Parse()
	goal := strings.Join(flag.Args(), " ")
	if goal == "" {
		return fmt.Errorf("usage: plan [flags] <goal>")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	p, err := llm.New(llm.ConfigFromEnv())
	if err != nil {
		return err
	}
	if *store == "" {
		dir, err := os.MkdirTemp("", "ea-plan-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*store = dir
	}
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: *store, Logger: log})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Provision(ctx); err != nil {
		return err
	}
	cfg := plan.Config{MaxRounds: *rounds}
	defs, err := plan.Kinds(&core.Services{LLM: p}, cfg)
	if err != nil {
		return err
	}
	node, err := actor.NewNode(conn, actor.Options{Logger: log})
	if err != nil {
		return err
	}
	if err := node.Host(defs...); err != nil {
		return err
	}
	nodeCtx, stopNode := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- node.Run(nodeCtx) }()
	defer func() { stopNode(); <-done }()
	for !node.Ready() {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("node stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		return err
	}
	if err := plan.Create(ctx, client, cfg); err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := plan.Run(jctx, client, cfg, goal)
	fmt.Printf("goal:       %s\nrounds:     %d\nplan:\n%s\n", res.Goal, res.Rounds, res.Plan)
	if err != nil {
		return err
	}
	fmt.Printf("summary:    %s\nconfidence: %.2f\n", res.Summary, res.Confidence)
	return nil
}
