// Command threads runs the LLM-driven supervisor example against any
// OpenAI-compatible endpoint, in one process with an embedded NATS server, a
// node hosting the worker threads and a supervisor:
//
//	EA_LLM_BASE_URL=http://localhost:11434/v1 EA_LLM_MODEL=llama3.2 \
//	  go run ./examples/threads/cmd/threads "why is the sky blue?"
//
// It prints every decision the model took and the final answer.
// Environment: EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY (see core/llm).
package main

import (
	"context"
	"encoding/json"
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
	"github.com/effectors/effectors/examples/threads"
	"github.com/effectors/effectors/supervisor"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "threads:", err)
		os.Exit(1)
	}
}

func run() error {
	timeout := flag.Duration("timeout", 5*time.Minute, "how long the orchestration may take")
	rounds := flag.Int("rounds", 4, "how many decisions the model may take")
	flag.Parse()
	goal := strings.Join(flag.Args(), " ")
	if goal == "" {
		return fmt.Errorf("usage: threads [flags] <goal>")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	p, err := llm.New(llm.ConfigFromEnv())
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ea-threads-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: log})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Provision(ctx); err != nil {
		return err
	}
	svc := &core.Services{LLM: p}
	worker, err := threads.Worker(svc)
	if err != nil {
		return err
	}
	node, err := actor.NewNode(conn, actor.Options{Logger: log})
	if err != nil {
		return err
	}
	if err := node.Host(worker); err != nil {
		return err
	}
	sup, err := supervisor.New(conn, supervisor.Options{Logger: log})
	if err != nil {
		return err
	}
	def, err := threads.Define(svc, threads.Config{MaxRounds: *rounds})
	if err != nil {
		return err
	}
	if err := sup.Register(def); err != nil {
		return err
	}
	runCtx, stopAll := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- node.Run(runCtx) }()
	go func() { done <- sup.Run(runCtx) }()
	defer func() { stopAll(); <-done; <-done }()
	for !node.Ready() || !sup.Ready() {
		time.Sleep(20 * time.Millisecond)
	}
	c, err := supervisor.NewClient(conn)
	if err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	id, err := c.Start(jctx, threads.Name, map[string]string{"goal": goal})
	if err != nil {
		return err
	}
	for {
		o, err := c.Status(jctx, id)
		if err != nil {
			return err
		}
		if o.Status.Final() {
			var s threads.State
			if err := json.Unmarshal(o.Results, &s); err != nil {
				return err
			}
			for _, d := range s.Decisions {
				fmt.Printf("decision %d: %s (model chose %q: %s) %s\n", d.Round, d.Next, d.Choice.Next, d.Choice.Reason, d.Why)
			}
			fmt.Printf("status: %s %s\nanswer: %s\n", o.Status, o.Error, s.Final)
			return nil
		}
		select {
		case <-jctx.Done():
			return jctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
