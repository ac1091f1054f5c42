package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is the release of the binaries when the build sets it:
//
//	go build -ldflags "-X github.com/effectors/effectors/internal/cli.version=v1.4.0" ./cmd/...
//
// It is the one place a build stamps a version into every binary (ea,
// ea-node, ea-supervisor and a node.Main or supervisord.Main of your own).
var version string

// Version returns the version of this binary: the one the build set with
// -ldflags (see version), else the main module's version from the build
// information (a tag, or the pseudo-version the go command derives from the
// VCS, e.g. v0.0.0-20261126105755-5bea32a3c1e2+dirty), else "devel" with
// the VCS revision when the build recorded one.
func Version() string {
	return versionOf(version, debug.ReadBuildInfo)
}

func versionOf(set string, read func() (*debug.BuildInfo, bool)) string {
	if set != "" {
		return set
	}
	bi, ok := read()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(len(rev), 12)] + dirty
}

// BuildInfo is a metric that is always 1 and carries the binary's version
// in its labels, as Prometheus exporters do:
//
//	ea_build_info{goversion="go1.26.0",program="ea-node",version="v1.4.0"} 1
func BuildInfo(program string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ea_build_info",
		Help: "Always 1; the labels say the binary's program, version and Go version.",
		ConstLabels: prometheus.Labels{
			"program":   program,
			"version":   Version(),
			"goversion": runtime.Version(),
		},
	})
	g.Set(1)
	return g
}
