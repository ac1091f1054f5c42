// Command ea-supervisor will run supervisors: orchestrations that publish
// task records to worker effectors and react to their results, with the
// orchestration API (ea.orch.*) and the live web view. It is a stub until the
// supervisor issue: it prints that it is not built yet and exits 1.
package main

import (
	"fmt"
	"io"
	"os"
)

const notBuilt = "ea-supervisor: not built yet (orchestration arrives with the supervisor issue); nothing to run"

const usage = `Usage: ea-supervisor [-h]

ea-supervisor will serve orchestrations (ea.orch.start, status, input,
cancel) and the live web view of the record log. It is not built yet: the
supervisor arrives with its own issue. Until then it exits with status 1.

To run effectors now, use ea-node (make run).
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run returns the exit status: 0 for -h, 1 otherwise.
func run(args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	fmt.Fprintln(stderr, notBuilt)
	return 1
}
