package actor

import (
	"context"

	"github.com/effectors/effectors/records"
)

// LoadState reads r's state document as an effector loading does (in a
// batch with others when many are read at once).
func (n *Node) LoadState(ctx context.Context, r records.Ref) (Document, uint64, error) {
	ent, err := n.loadState(ctx, r)
	return ent.Value, ent.Revision, err
}

// GetState reads r's state document with one KV get.
func (n *Node) GetState(ctx context.Context, r records.Ref) (Document, uint64, error) {
	ent, err := n.states.Get(ctx, n.names.StateKey(r))
	return ent.Value, ent.Revision, err
}

// StatesBatched reports how many state documents the node read in batches.
func (n *Node) StatesBatched() int64 {
	p := n.place.Load()
	if p == nil {
		return 0
	}
	return p.loads.batched.Load()
}
