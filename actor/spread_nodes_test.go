package actor_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
)

// perNode counts, for each kind, the partition leases each node holds
// (lease keys part.<kind>.<n>).
func perNode(held map[string]string) map[string]map[string]int {
	out := map[string]map[string]int{}
	for key, node := range held {
		kind := strings.Split(key, ".")[1]
		if out[kind] == nil {
			out[kind] = map[string]int{}
		}
		out[kind][node]++
	}
	return out
}

// spreadWithin reports whether every partition of every kind hosted by the
// nodes ids has a lease, each held by one of ids, and no node holds more
// than ceil(P/N) of a kind; it describes what it found.
func spreadWithin(held map[string]string, kinds []string, parts int, ids []string) (bool, string) {
	limit := (parts + len(ids) - 1) / len(ids)
	counts := perNode(held)
	desc := fmt.Sprint(counts)
	for _, kind := range kinds {
		total := 0
		for node, k := range counts[kind] {
			if k > limit || !slices.Contains(ids, node) {
				return false, desc
			}
			total += k
		}
		if total != parts {
			return false, desc
		}
	}
	return true, desc
}

// TestSpreadOverNodes runs 3 and 5 nodes named n1..nN on one server and
// reads the partition leases from the placement bucket, as an operator
// would: each node holds at most ceil(64/N) partitions of each kind (22 of
// 64 for 3 nodes, 13 for 5; plain rendezvous gave n1 29 of 64 with 3) and
// reads exactly the partitions whose lease names it. Then n1 dies (its
// connection drops, no goodbye): the others hold at most ceil(64/(N-1))
// each. Then n1 comes back under the same name: every lease is where it was
// before the failure.
func TestSpreadOverNodes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Parallel()
			srv, conn := serverWith(t, bus.Config{Partitions: bus.DefaultPartitions}) // the default count
			leases := watchLeases(t, conn)
			parts := conn.Names().Partitions()
			kinds := []string{"counter", "controller"}
			start := func(id string) (*runningNode, *bus.Conn) {
				nc := srv.Connect(t)
				// A TTL long enough not to flap on a loaded machine: the
				// node that dies is found by its closed connection.
				opts := actor.Options{Heartbeat: 250 * time.Millisecond, HeartbeatTTL: 2 * time.Second, NodeID: id}
				return startNodeWith(t, nc, opts, nil), nc
			}
			var ids []string
			nodes := map[string]*runningNode{}
			conns := map[string]*bus.Conn{}
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("n%d", i)
				ids = append(ids, id)
				nodes[id], conns[id] = start(id)
			}
			settled := func(what string, ids []string) map[string]string {
				t.Helper()
				var desc string
				actortest.Eventually(t, time.Minute, what, func() bool {
					ok, d := spreadWithin(leases.holders(), kinds, parts, ids)
					desc = d
					if !ok {
						return false
					}
					held := perNode(leases.holders())
					for _, id := range ids {
						sum := 0
						for _, kind := range kinds {
							sum += held[kind][id]
						}
						if nodes[id].Reading() != sum {
							return false
						}
					}
					return true
				})
				t.Logf("%s: %s", what, desc)
				return leases.holders()
			}
			before := settled(fmt.Sprintf("%d nodes hold at most ceil(%d/%d) partitions of each kind and read them", n, parts, n), ids)

			conns["n1"].NATS().Close()
			settled(fmt.Sprintf("after n1 died, %d nodes hold at most ceil(%d/%d) each", n-1, parts, n-1), ids[1:])

			nodes["n1"].Stop(t)
			nodes["n1"], conns["n1"] = start("n1")
			after := settled("n1 is back", ids)
			if !maps.Equal(before, after) {
				t.Fatalf("after n1 came back the leases differ from before:\nbefore %v\nafter  %v", perNode(before), perNode(after))
			}
		})
	}
}
