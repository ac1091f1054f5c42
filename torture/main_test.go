//go:build unix

package torture

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/effectors/effectors/internal/proctest"
	"go.uber.org/goleak"
)

// The binaries under test, built by TestMain into a temporary directory:
// ea-node and ea-supervisor from this module (with the race detector when
// the test runs with it), nats-server from the module cache (the version
// go.mod requires, without the race detector: it is not ours).
var bins struct {
	node, supervisor, natsServer string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "torture-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	bins.node = filepath.Join(dir, "ea-node")
	bins.supervisor = filepath.Join(dir, "ea-supervisor")
	bins.natsServer = filepath.Join(dir, "nats-server")
	if err := build(); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	// Every child process is waited for and every connection, proxy and
	// watcher of the test is closed at its cleanup: nothing may be left.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

func build() error {
	if err := proctest.Build(bins.node, "../cmd/node"); err != nil {
		return err
	}
	if err := proctest.Build(bins.supervisor, "../cmd/supervisor"); err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("find the go command: %w", err)
	}
	cmd := exec.Command(goBin, "build", "-o", bins.natsServer, "github.com/nats-io/nats-server/v2")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build nats-server: %w", err)
	}
	return nil
}
