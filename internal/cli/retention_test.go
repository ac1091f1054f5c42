package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/cli"
)

func TestRetentionAge(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true}, {"unlimited", bus.Unlimited, true}, {"UNLIMITED", bus.Unlimited, true},
		{"720h", 720 * time.Hour, true}, {"30d", 30 * 24 * time.Hour, true}, {" 2m ", 2 * time.Minute, true},
		{"1m", 0, false}, {"0", 0, false}, {"-1h", 0, false}, {"0d", 0, false}, {"xd", 0, false}, {"soon", 0, false},
	} {
		got := time.Duration(12345)
		want := cli.RetentionAge(tc.in, &got)
		if (want == "") != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("RetentionAge(%q) = %s, %q; want %s, ok %v", tc.in, got, want, tc.want, tc.ok)
		}
	}
}

func TestRetentionBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true}, {"unlimited", bus.Unlimited, true}, {"10GB", 10e9, true}, {"512MiB", 512 << 20, true},
		{"1.5GiB", 3 << 29, true}, {"8388608", 8 << 20, true}, {"10 MB", 10e6, true}, {"2T", 2e12, true},
		{"1MB", 0, false}, {"0", 0, false}, {"-5GB", 0, false}, {"NaN", 0, false}, {"Inf", 0, false},
		{"lots", 0, false}, {"1e30TB", 0, false},
	} {
		got := int64(12345)
		want := cli.RetentionBytes(tc.in, &got)
		if (want == "") != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("RetentionBytes(%q) = %d, %q; want %d, ok %v", tc.in, got, want, tc.want, tc.ok)
		}
	}
}

// TestRetentionSettings: the four settings parse from flags and the
// environment into a bus.Retention, and a bad value names the flag and
// variable.
func TestRetentionSettings(t *testing.T) {
	type cfg struct{ R bus.Retention }
	settings := cli.RetentionSettings(func(c *cfg) *bus.Retention { return &c.R })
	env := map[string]string{"EA_LOG_MAX_AGE": "30d", "EA_DEAD_MAX_BYTES": "1GiB"}
	var c cfg
	if _, err := cli.Parse("ea-test", settings, []string{"--log-max-bytes", "10GB", "--dead-max-age", "unlimited"}, func(k string) string { return env[k] }, &c); err != nil {
		t.Fatal(err)
	}
	want := bus.Retention{LogMaxAge: 30 * 24 * time.Hour, LogMaxBytes: 10e9, DeadMaxAge: bus.Unlimited, DeadMaxBytes: 1 << 30}
	if c.R != want {
		t.Fatalf("parsed %+v, want %+v", c.R, want)
	}
	env = map[string]string{"EA_LOG_MAX_AGE": "1s"}
	_, err := cli.Parse("ea-test", settings, nil, func(k string) string { return env[k] }, &c)
	if err == nil || !strings.Contains(err.Error(), "--log-max-age") || !strings.Contains(err.Error(), "EA_LOG_MAX_AGE") {
		t.Fatalf("bad age from the environment: %v", err)
	}
	var u strings.Builder
	cli.WriteFlags(&u, settings)
	for _, s := range []string{"--log-max-age AGE", "--log-max-bytes SIZE", "--dead-max-age AGE", "--dead-max-bytes SIZE", "env EA_DEAD_MAX_BYTES"} {
		if !strings.Contains(u.String(), s) {
			t.Errorf("usage lacks %q", s)
		}
	}
}
