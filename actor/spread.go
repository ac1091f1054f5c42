package actor

import (
	"cmp"
	"slices"
)

// An even spread: which live node owns which partition of a kind.
//
// Plain rendezvous hashing (each partition to the node with the highest
// score, see [score]) moves only the leaving or joining node's share, but
// with 64 partitions it spreads them unevenly: over three nodes one held 29
// (1.36× its fair share), and up to 1.75× for 16 nodes (see spread_test.go).
// Nodes read partitions, so the busiest node carries that much more load,
// and on a failover that much more state to load.
//
// So the owners are chosen by bounded-load rendezvous: every (partition,
// node) pair is ranked by its score, highest first, and each partition goes
// to the node of its first pair whose node still holds fewer than
// ceil(P/N) partitions of the kind (N the live nodes hosting it). Every node
// holds ceil(P/N) or fewer, the least any assignment of whole partitions
// can reach; a node's partitions are mostly its top-scored ones, so a node
// joining or leaving moves a little more than its own share (about 1.3× the
// minimum on average over 2 to 16 nodes, see TestSpreadMoves). The owner of
// each partition is a function of the live hosts alone (sorted, so their
// order does not matter): every node computes the same owners from the same
// membership, with no coordinator, and the same membership after a failover
// and a rejoin gives the same owners as before.
//
// Nodes announce the rule in their heartbeat (memberDoc.Spread). While a live
// node hosting a kind does not (a node of an older version during a rolling
// upgrade), the nodes fall back to plain rendezvous for that kind, so that
// two nodes never disagree about who owns a partition for longer than a
// membership change takes to be seen (they would hand its lease to each
// other at every pass).

// spreadBounded names the bounded-load rule in memberDoc.Spread.
const spreadBounded = "bounded"

// spread returns the owner of each partition 0..parts-1 of kind among the
// live hosts of the kind (bounded-load rendezvous, see above); with no
// hosts, every owner is "". hosts need not be sorted.
func spread(hosts []string, kind string, parts int) []string {
	owners := make([]string, parts)
	if len(hosts) == 0 || parts <= 0 {
		return owners
	}
	nodes := slices.Clone(hosts)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	limit := (parts + len(nodes) - 1) / len(nodes)
	type pair struct {
		score      uint64
		node, part int
	}
	pairs := make([]pair, 0, parts*len(nodes))
	for num := range parts {
		s := slot{kind: kind, num: num}
		for i, n := range nodes {
			pairs = append(pairs, pair{score: score(n, s), node: i, part: num})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.node, b.node); c != 0 {
			return c
		}
		return cmp.Compare(a.part, b.part)
	})
	held := make([]int, len(nodes))
	left := parts
	for _, pr := range pairs {
		if owners[pr.part] != "" || held[pr.node] >= limit {
			continue
		}
		owners[pr.part] = nodes[pr.node]
		held[pr.node]++
		if left--; left == 0 {
			break
		}
	}
	return owners
}

// rendezvous returns the owner of each partition 0..parts-1 of kind by plain
// rendezvous hashing: the host with the highest score.
func rendezvous(hosts []string, kind string, parts int) []string {
	owners := make([]string, parts)
	for num := range parts {
		s := slot{kind: kind, num: num}
		var best uint64
		for _, h := range hosts {
			if sc := score(h, s); owners[num] == "" || sc > best || (sc == best && h < owners[num]) {
				owners[num], best = h, sc
			}
		}
	}
	return owners
}
