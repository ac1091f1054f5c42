package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/effectors/effectors/internal/proctest"
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
	if err := proctest.Build(binary, "."); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "TestMain: build ea-supervisor:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// envOf is a getenv reading m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
