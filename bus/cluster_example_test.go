package bus_test

import (
	"errors"
	"fmt"

	"github.com/effectors/effectors/bus"
)

// A server joining a cluster needs a name of its own, the cluster's name, an
// address for routes and routes to the others; Validate says what is missing.
func ExampleServerConfig_Validate() {
	cfg := bus.ServerConfig{
		Listen:   "127.0.0.1:4222",
		StoreDir: "data/n1",
		Cluster: bus.ClusterConfig{
			Name:   "east",
			Listen: "127.0.0.1:6222",
			Routes: []string{"nats-route://127.0.0.1:6223", "nats-route://127.0.0.1:6224"},
		},
	}
	err := cfg.Validate()
	fmt.Println(errors.Is(err, bus.ErrInvalidConfig))
	fmt.Println(err)

	cfg.Name = "n1"
	fmt.Println(cfg.Validate())
	// Output:
	// true
	// bus: invalid config: cluster "east": set the server Name, unique within the cluster (JetStream tells servers apart by name)
	// <nil>
}
