package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/proctest"

	"go.uber.org/goleak"
)

// binary is the ea-node binary TestMain builds for the process tests.
var binary string

// Environment variables that make the test binary a NATS server process
// instead of running tests (see serveNATS).
const (
	envServeNATS = "EFFECTORS_TEST_SERVE_NATS" // the client address to listen on
	envNATSStore = "EFFECTORS_TEST_NATS_STORE" // its JetStream store directory
)

func TestMain(m *testing.M) {
	if listen := os.Getenv(envServeNATS); listen != "" {
		os.Exit(serveNATS(listen, os.Getenv(envNATSStore)))
	}
	dir, err := os.MkdirTemp("", "ea-node-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ea-node")
	if err := proctest.Build(binary, "."); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "TestMain: build ea-node:", err)
		os.Exit(1)
	}
	// Process tests leave no goroutine behind in this process (each child is
	// waited for), and the in-process tests run the node's own code here, so
	// leaks are checked for both.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// serveNATS runs an embedded NATS server with JetStream on listen, storing in
// store, until SIGTERM or SIGINT: the test binary re-executed as the server
// process of TestChaosNATSRestart, unless bustest.ServerEnv names a
// nats-server binary to run instead (make test). It prints "nats-server ready" to stdout
// once it accepts clients and returns the exit status.
func serveNATS(listen, store string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var srv *bus.Server
	var err error
	for range 50 { // the port of a killed predecessor may linger briefly
		if srv, err = bus.StartServer(bus.ServerConfig{Listen: listen, StoreDir: store, Name: "chaos-nats"}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats-server:", err)
		return 1
	}
	fmt.Println("nats-server ready on", srv.Addr())
	<-ctx.Done()
	srv.Shutdown()
	fmt.Println("nats-server stopped")
	return 0
}
