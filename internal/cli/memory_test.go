package cli_test

import (
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/effectors/effectors/internal/cli"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"80MiB", 80 << 20, true}, {" 2GiB ", 2 << 30, true}, {"512MB", 512e6, true}, {"1.5GiB", 3 << 29, true},
		{"16MiB", 16 << 20, true}, {"67108864", 64 << 20, true}, {"off", -1, true}, {"OFF", -1, true}, {"none", -1, true},
		{cli.DefaultMemoryLimit, -1, true},
		{"", 0, false}, {"15MiB", 0, false}, {"0", 0, false}, {"-1GiB", 0, false}, {"lots", 0, false},
		{"MiB", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"9e30GiB", 0, false}, {"80 MiB extra", 0, false}, {"100000000 x", 0, false},
	} {
		got := int64(7)
		want := cli.ParseMemoryLimit(tc.in, &got)
		switch {
		case tc.ok && want != "":
			t.Errorf("ParseMemoryLimit(%q): refused: %s", tc.in, want)
		case tc.ok && got != tc.want:
			t.Errorf("ParseMemoryLimit(%q) = %d, want %d", tc.in, got, tc.want)
		case !tc.ok && (want == "" || got != 7):
			t.Errorf("ParseMemoryLimit(%q) accepted (%d), want an error", tc.in, got)
		case !tc.ok && !strings.Contains(want, "16MiB"):
			t.Errorf("ParseMemoryLimit(%q): %q does not say what is allowed", tc.in, want)
		}
	}
}

// TestApplyMemoryLimit: the limit is set and the previous one put back;
// GOMEMLIMIT wins; "off" is no limit. Not parallel: the limit is the
// process's.
func TestApplyMemoryLimit(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	before := debug.SetMemoryLimit(-1)
	restore := cli.ApplyMemoryLimit(96<<20, "", log)
	if got := debug.SetMemoryLimit(-1); got != 96<<20 {
		t.Errorf("limit %d after ApplyMemoryLimit(96MiB), want %d", got, 96<<20)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit %d after restore, want the previous %d", got, before)
	}
	restore = cli.ApplyMemoryLimit(96<<20, "1GiB", log)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit %d with GOMEMLIMIT set, want it untouched (%d)", got, before)
	}
	restore()
	restore = cli.ApplyMemoryLimit(-1, "", log)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d with off, want none (%d)", got, int64(math.MaxInt64))
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit %d after restore, want the previous %d", got, before)
	}
}
