package cli

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
)

// RetentionSettings are the retention settings every binary that provisions
// has: --log-max-age, --log-max-bytes, --dead-max-age, --dead-max-bytes
// (EA_LOG_MAX_AGE, ...), checked into the bus.Retention of C that field
// returns. Empty (the default) keeps what the streams have; "unlimited"
// removes the limit; otherwise an age (720h, 30d) or a size (10GB, 512MiB,
// a number of bytes).
func RetentionSettings[C any](field func(*C) *bus.Retention) []*Setting[C] {
	age := func(name, what string, dst func(*bus.Retention) *time.Duration) *Setting[C] {
		return &Setting[C]{Name: name, Arg: "AGE", Def: "", DefText: "keep what the stream has (none when created)",
			Usage: "drop " + what + ` older than this (e.g. 720h or 30d); "unlimited" removes the limit. Applied to existing streams at start`,
			Check: func(c *C, v string) string { return RetentionAge(v, dst(field(c))) }}
	}
	size := func(name, what string, dst func(*bus.Retention) *int64) *Setting[C] {
		return &Setting[C]{Name: name, Arg: "SIZE", Def: "", DefText: "keep what the stream has (none when created)",
			Usage: "drop the oldest " + what + ` beyond this size (e.g. 10GB, 512MiB); "unlimited" removes the limit. Applied to existing streams at start`,
			Check: func(c *C, v string) string { return RetentionBytes(v, dst(field(c))) }}
	}
	return []*Setting[C]{
		age("log-max-age", "records of the record log (mailbox and outbox streams, processed or not)",
			func(r *bus.Retention) *time.Duration { return &r.LogMaxAge }),
		size("log-max-bytes", "records of each record log stream (mailboxes, outboxes), processed or not,",
			func(r *bus.Retention) *int64 { return &r.LogMaxBytes }),
		age("dead-max-age", "dead letters", func(r *bus.Retention) *time.Duration { return &r.DeadMaxAge }),
		size("dead-max-bytes", "dead letters", func(r *bus.Retention) *int64 { return &r.DeadMaxBytes }),
	}
}

const wantAge = `want an age such as 720h, 90m or 30d (at least the 2m duplicate window), "unlimited", or empty to keep the streams' setting`

// RetentionAge checks a retention age into dst: empty keeps (0),
// "unlimited" is bus.Unlimited, else a duration (Go syntax, or whole days
// as 30d) of at least two minutes, or returns what is allowed.
func RetentionAge(v string, dst *time.Duration) (want string) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		*dst = 0
		return ""
	case strings.EqualFold(v, "unlimited"):
		*dst = bus.Unlimited
		return ""
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 100_000 {
			return wantAge
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return wantAge
		}
	}
	if d < 2*time.Minute {
		return wantAge
	}
	*dst = d
	return ""
}

// byteUnits are the size suffixes RetentionBytes takes, longest first.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1},
}

const wantBytes = `want a size such as 10GB, 512MiB or 1073741824 (at least 8MiB), "unlimited", or empty to keep the streams' setting`

// RetentionBytes checks a retention size into dst: empty keeps (0),
// "unlimited" is bus.Unlimited, else a size in bytes with an optional unit
// (KB MB GB TB, KiB MiB GiB TiB) of at least 8 MiB, or returns what is
// allowed.
func RetentionBytes(v string, dst *int64) (want string) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		*dst = 0
		return ""
	case strings.EqualFold(v, "unlimited"):
		*dst = bus.Unlimited
		return ""
	}
	b, ok := parseBytes(v)
	if !ok || b < bus.MinRetentionBytes {
		return wantBytes
	}
	*dst = b
	return ""
}

// parseBytes reads a positive size in bytes with an optional unit of
// byteUnits (a fraction is allowed: 1.5GiB); ok is false for anything else
// or a size past half the int64 range.
func parseBytes(v string) (b int64, ok bool) {
	mult := int64(1)
	for _, u := range byteUnits {
		if num, found := strings.CutSuffix(v, u.suffix); found {
			v, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) || n <= 0 || math.IsInf(n, 0) || n*float64(mult) > math.MaxInt64/2 {
		return 0, false
	}
	return int64(n * float64(mult)), true
}
