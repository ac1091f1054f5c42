package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// binary is the ea-supervisor binary TestMain builds for the process tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ea-supervisor-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ea-supervisor")
	if err := build(binary); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "TestMain: build ea-supervisor:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// build compiles this package into out, with the race detector when the
// tests themselves run with it.
func build(out string) error {
	goBin, err := exec.LookPath("go")
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
