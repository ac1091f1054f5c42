package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binary is the ea-node binary TestMain builds for the process tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ea-node-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ea-node")
	if err := build(binary); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "TestMain: build ea-node:", err)
		os.Exit(1)
	}
	// Process tests leave no goroutine behind in this process (each child is
	// waited for), and the in-process tests run the node's own code here, so
	// leaks are checked for both.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// build compiles this package into out, with the race detector when the
// tests themselves run with it.
func build(out string) error {
	goBin, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		return err
	}
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}
