// Command greeter-node is a node binary for a user's own kind (package
// greeter): one line of main, with every flag, EA_* variable and endpoint of
// ea-node. Run greeter-node -h for the flags.
package main

import (
	"github.com/effectors/effectors/examples/greeter"
	"github.com/effectors/effectors/node"
)

func main() { node.Main(greeter.Kind()) }
