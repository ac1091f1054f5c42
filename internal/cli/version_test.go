package cli

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	info := func(v string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: "github.com/effectors/effectors", Version: v}, Settings: settings}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "5bea32a3c1e2aabbccddeeff0011223344556677"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	for _, tc := range []struct {
		name, set string
		read      func() (*debug.BuildInfo, bool)
		want      string
	}{
		{"set with -ldflags wins", "v1.4.0", info("v0.0.0-x"), "v1.4.0"},
		{"the module's version (a tag or a pseudo-version)", "", info("v0.0.0-20261126105755-5bea32a3c1e2+dirty"), "v0.0.0-20261126105755-5bea32a3c1e2+dirty"},
		{"devel with the revision", "", info("(devel)", rev, dirty), "devel-5bea32a3c1e2+dirty"},
		{"devel, clean", "", info("(devel)", rev), "devel-5bea32a3c1e2"},
		{"nothing recorded", "", info(""), "devel"},
		{"no build info", "", none, "devel"},
	} {
		if got := versionOf(tc.set, tc.read); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if Version() == "" {
		t.Error("Version() is empty")
	}
}

// TestStartProcessVersion: every binary started through StartProcess logs
// its version and exports it as ea_build_info.
func TestStartProcessVersion(t *testing.T) {
	var logs bytes.Buffer
	p, err := StartProcess(ProcessOptions{Program: "prog", Metrics: "127.0.0.1:0", Log: NewLogger(slog.LevelInfo, "text", &logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !strings.Contains(logs.String(), "msg=starting program=prog version="+Version()) {
		t.Errorf("start log %q lacks the version", logs.String())
	}
	code, body := get(t, "http://"+p.Metrics.Addr()+"/metrics")
	want := `ea_build_info{goversion="`
	if code != 200 || !strings.Contains(body, want) || !strings.Contains(body, `program="prog",version="`+Version()+`"} 1`) {
		t.Errorf("GET /metrics = %d, no ea_build_info with the version:\n%s", code, grepLines(body, "ea_build_info"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
