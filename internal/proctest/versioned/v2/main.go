// Command v2 is a node hosting kind tally at state version 2, for the
// rolling-upgrade test of package versioned.
package main

import (
	"github.com/effectors/effectors/internal/proctest/versioned"
	"github.com/effectors/effectors/node"
)

func main() { node.Main(versioned.V2()) }
