package cli

import (
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
)

// DefaultMemoryLimit is the --memory-limit of a node binary when neither the
// flag, its variable nor GOMEMLIMIT says otherwise: none. A soft limit on
// the Go runtime's memory (heap, goroutine stacks, runtime structures; not
// the binary's own mapped code) makes the runtime collect garbage sooner as
// the process nears it, and keeps it small after a burst; but a burst whose
// own memory is over the limit then runs with the collector busy all
// through it: measured with bench/scale (BENCHMARKS.md, "Node memory and
// 10,000 active"), 80 MiB made a burst over 10,000 active counters run at
// 12–15 % of its rate. What a burst leaves behind is returned once the node is
// quiet instead ([ReleaseWhenQuiet]); set a limit to bound the process under
// load as well, above its live heap under load.
const DefaultMemoryLimit = "off"

// minMemoryLimit is the least limit accepted: below it the runtime would
// collect garbage all the time for an idle node.
const minMemoryLimit = 16 << 20

const wantMemoryLimit = `want a size such as 80MiB, 512MiB or 2GiB (at least 16MiB), or "off" for no limit`

// MemoryLimitSetting is --memory-limit (EA_MEMORY_LIMIT), checked into the
// int64 of C that field returns: bytes, or -1 for "off". See
// [ApplyMemoryLimit].
func MemoryLimitSetting[C any](field func(*C) *int64) *Setting[C] {
	return &Setting[C]{Arg: "SIZE", Def: DefaultMemoryLimit,
		Usage: `soft limit on the node's Go memory (heap and stacks), e.g. 512MiB: nearing it, the runtime collects garbage sooner and returns memory to the system. Set it above the node's live heap under load (a loaded effector costs about 2 KiB plus its state and records in flight), or bursts run with the collector busy. GOMEMLIMIT, when set, wins. Without a limit the node still returns what a burst left once it is quiet`,
		Check: func(c *C, v string) string { return ParseMemoryLimit(v, field(c)) }}
}

// ParseMemoryLimit checks a memory limit into dst: "off" (or "none") is -1,
// else a size in bytes with an optional unit (KB MB GB TB, KiB MiB GiB TiB)
// of at least 16 MiB; otherwise it returns what is allowed.
func ParseMemoryLimit(v string, dst *int64) (want string) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "off") || strings.EqualFold(v, "none") {
		*dst = -1
		return ""
	}
	b, ok := parseBytes(v)
	if !ok || b < minMemoryLimit {
		return wantMemoryLimit
	}
	*dst = b
	return ""
}

// ApplyMemoryLimit sets the Go runtime's soft memory limit to limit bytes
// (-1: none) unless gomemlimit, the process's GOMEMLIMIT variable, is set:
// the runtime applied that one at start, and it wins. It logs what is in effect
// at debug level and returns the func that puts the previous limit back (a
// node run inside a test process must not leave its limit behind).
func ApplyMemoryLimit(limit int64, gomemlimit string, log *slog.Logger) (restore func()) {
	if env := strings.TrimSpace(gomemlimit); env != "" {
		log.Debug("memory limit from GOMEMLIMIT; --memory-limit ignored", "GOMEMLIMIT", env)
		return func() {}
	}
	set := int64(math.MaxInt64) // the runtime's "no limit"
	if limit > 0 {
		set = limit
	}
	prev := debug.SetMemoryLimit(set)
	if limit > 0 {
		log.Debug("memory limit", "bytes", limit)
	}
	return func() { debug.SetMemoryLimit(prev) }
}
