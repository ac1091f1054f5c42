package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/effectors/effectors/internal/cli"
)

// versionInfo is what ea version prints with --json.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func cmdVersion() *command {
	return &command{
		name: "version", short: "print ea's version",
		long: `Print the version of ea (set at build time, or the one the go command derived
from the repository), the Go version it was built with, and the platform.
It connects to nothing. ea-node and ea-supervisor print theirs in the
banner they print once ready, log it at start and export it as the metric
ea_build_info.`,
		run: func(_ context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 0); err != nil {
				return err
			}
			v := versionInfo{Version: cli.Version(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if a.g.json {
				return a.printJSON(v)
			}
			_, err := fmt.Fprintf(a.stdout, "ea %s (%s, %s/%s)\n", v.Version, v.Go, v.OS, v.Arch)
			return err
		},
	}
}
