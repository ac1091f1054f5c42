package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{args: nil, status: 1, stderr: notBuilt},
		{args: []string{"--nats", "nats://x:4222"}, status: 1, stderr: notBuilt},
		{args: []string{"-h"}, status: 0, stdout: "Usage: ea-supervisor"},
		{args: []string{"--help"}, status: 0, stdout: "Usage: ea-supervisor"},
	} {
		var out, errOut bytes.Buffer
		if got := run(tc.args, &out, &errOut); got != tc.status {
			t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.status)
		}
		if !strings.Contains(out.String(), tc.stdout) || (tc.stdout == "" && out.Len() > 0) {
			t.Errorf("run(%q) stdout = %q, want %q", tc.args, out.String(), tc.stdout)
		}
		if !strings.Contains(errOut.String(), tc.stderr) || (tc.stderr == "" && errOut.Len() > 0) {
			t.Errorf("run(%q) stderr = %q, want %q", tc.args, errOut.String(), tc.stderr)
		}
	}
}
