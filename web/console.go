package web

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/deadletter"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// The console's requests (docs/gateway.md, "Console requests"): act on a
// dead letter, and see the nodes.
const (
	TypeDeadReplay  = "dead.replay"  // request: send a dead letter's record again, as a new record linked to it
	TypeDeadDiscard = "dead.discard" // request: delete a dead letter from the dead-letter stream
	TypeNodes       = "nodes"        // request (admins): nodes, the partitions each reads, their counts, index lag
)

// deadRequest is the body of dead.replay and dead.discard.
type deadRequest struct {
	Type string `json:"type"`
	Req  string `json:"req"`
	// Seq is the dead letter's sequence in the dead-letter stream (the
	// "seq" of its dead frame).
	Seq uint64 `json:"seq"`
}

// DeadReplayResult is the result of dead.replay: the record sent again.
type DeadReplayResult struct {
	// ID is the new record's id; Cause, the original record's id.
	ID       string `json:"id"`
	Cause    string `json:"cause"`
	Effector string `json:"effector"`
	Type     string `json:"type"`
	// Seq is the new record's sequence in the mailbox stream.
	Seq uint64 `json:"seq"`
	// DeadSeq is the replayed dead letter's sequence.
	DeadSeq uint64 `json:"dead_seq"`
}

// NodesResult is the result of nodes.
type NodesResult struct {
	// Time is when the gateway read placement and the consumers.
	Time  time.Time  `json:"time"`
	Nodes []NodeInfo `json:"nodes"`
	// Unheld are partitions whose lease names no node that announces
	// itself (free, or held by a node gone from placement).
	Unheld []PartitionInfo `json:"unheld"`
	// Partitions is the partition count of every kind.
	Partitions int `json:"partitions"`
	// IndexLag is how many records the record store's indexer has not
	// indexed yet; IndexLagError says why it is unknown, when it is.
	IndexLag      uint64 `json:"index_lag"`
	IndexLagError string `json:"index_lag_error,omitempty"`
}

// NodeInfo is one node as placement knows it.
type NodeInfo struct {
	ID      string    `json:"id"`
	Kinds   []string  `json:"kinds"`
	Started time.Time `json:"started"`
	// Beat is the node's last heartbeat (every second by default; a node
	// not heard from for three is dead to the others).
	Beat       time.Time       `json:"beat"`
	Partitions []PartitionInfo `json:"partitions"`
	// Done and Pending add up its partitions' counts; the console's
	// throughput is Done's increase per second between two answers.
	Done    uint64 `json:"done"`
	Pending uint64 `json:"pending"`
}

// PartitionInfo is one partition of a kind: its lease and its consumer.
type PartitionInfo struct {
	Kind      string    `json:"kind"`
	Partition int       `json:"partition"`
	Node      string    `json:"node,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	// Done is how many deliveries its consumer has had acknowledged (the
	// consumer's ack floor; a consumer reset when the lease moves counts
	// again from there); Pending, the records stored and not yet
	// acknowledged. Both are 0 when the consumer cannot be read (Error).
	Done    uint64 `json:"done"`
	Pending uint64 `json:"pending"`
	Error   string `json:"error,omitempty"`
}

// nodeDoc and leaseDoc are what actor's placement writes (node.<id>,
// part.<kind>.<n> in the placement bucket).
type (
	nodeDoc struct {
		ID      string    `json:"id"`
		Kinds   []string  `json:"kinds"`
		Started time.Time `json:"started"`
		Beat    time.Time `json:"beat"`
	}
	leaseDoc struct {
		Node  string    `json:"node"`
		Since time.Time `json:"since"`
	}
)

// maxNodeView bounds what one nodes answer reads: placement keys listed.
const maxNodeView = 10_000

// consoleAnswer answers the console's requests (see answer).
func (s *session) consoleAnswer(ctx context.Context, h head, data []byte) (any, string, error) {
	switch h.Type {
	case TypeDeadReplay, TypeDeadDiscard:
		var f deadRequest
		if err := decodeStrict(data, &f); err != nil {
			return nil, CodeBadRequest, fmt.Errorf("%s frame: %w", h.Type, err)
		}
		m, code, err := s.deadLetter(ctx, h.Type, f.Seq)
		if err != nil {
			return nil, code, err
		}
		if h.Type == TypeDeadDiscard {
			return s.discardDead(ctx, m)
		}
		return s.replayDead(ctx, m)
	case TypeNodes:
		var f struct {
			Type string `json:"type"`
			Req  string `json:"req"`
		}
		if err := decodeStrict(data, &f); err != nil {
			return nil, CodeBadRequest, fmt.Errorf("nodes frame: %w", err)
		}
		if !s.identity().Admin() {
			code, err := s.forbid("nodes: the node view is for admins; %s is a user", s.identity().Name)
			return nil, code, err
		}
		res, err := s.g.nodes(ctx)
		if err != nil {
			return nil, CodeUnavailable, err
		}
		return res, "", nil
	}
	return nil, CodeUnknownType, fmt.Errorf("unknown frame type %q", truncate(h.Type, 64))
}

// deadLetter reads the dead letter at seq when the connection may act on
// it: its record's EA-Owner is the connection's name, or it is an admin.
func (s *session) deadLetter(ctx context.Context, typ string, seq uint64) (bus.StoredMsg, string, error) {
	if seq == 0 {
		return bus.StoredMsg{}, CodeBadRequest, fmt.Errorf("%s frame: missing \"seq\": the dead letter's sequence (the seq of its dead frame)", typ)
	}
	stream := s.g.names.DeadStream()
	m, err := s.g.conn.StoredAt(ctx, stream, seq, "")
	switch {
	case errors.Is(err, bus.ErrNoMessage):
		return m, CodeNotFound, fmt.Errorf("no dead letter at %s #%d (discarded, or dropped by the stream's limits)", stream, seq)
	case err != nil:
		return m, CodeUnavailable, fmt.Errorf("dead letter %s #%d: %w", stream, seq, err)
	}
	m.Seq = seq
	if owner := m.Header.Get(records.HeaderOwner); !s.sees(owner) {
		code, err := s.forbidOwned(fmt.Sprintf("dead letter #%d", seq), owner, "dead letters of its own records")
		return bus.StoredMsg{}, code, err
	}
	return m, "", nil
}

// replayDead sends dead letter m's record again, as a new record linked to
// it (deadletter.Replay, as ea dead replay does), to the effector it was
// sent to, which the connection must own.
func (s *session) replayDead(ctx context.Context, m bus.StoredMsg) (any, string, error) {
	rec, ref, err := deadletter.Replay(ctx, s.g.conn, m)
	switch {
	case errors.Is(err, deadletter.ErrNoOriginal):
		return nil, CodeNotFound, err
	case err != nil:
		return nil, CodeBadRequest, err
	}
	if _, code, err := s.ownEffector(ctx, ref); err != nil {
		return nil, code, fmt.Errorf("replay dead letter #%d: %w", m.Seq, err)
	}
	sent, err := s.g.actors.Send(ctx, ref, rec)
	if err != nil {
		return nil, codeOf(err), fmt.Errorf("replay dead letter #%d to %s: %w", m.Seq, ref, err)
	}
	return DeadReplayResult{ID: sent.ID, Cause: sent.Cause, Effector: ref.String(), Type: sent.Type, Seq: sent.Seq, DeadSeq: m.Seq}, "", nil
}

// discardDead deletes dead letter m from the dead-letter stream.
func (s *session) discardDead(ctx context.Context, m bus.StoredMsg) (any, string, error) {
	stream := s.g.names.DeadStream()
	st, err := s.g.conn.JetStream().Stream(ctx, stream)
	if err != nil {
		return nil, CodeUnavailable, fmt.Errorf("discard dead letter #%d: %w", m.Seq, err)
	}
	if err := st.DeleteMsg(ctx, m.Seq); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, CodeNotFound, fmt.Errorf("no dead letter at %s #%d (discarded meanwhile)", stream, m.Seq)
		}
		return nil, CodeUnavailable, fmt.Errorf("discard dead letter #%d: %w", m.Seq, err)
	}
	return map[string]any{"seq": m.Seq, "discarded": true}, "", nil
}

// nodes reads placement (nodes and leases: the placement bucket's current
// values through one watch), every held partition's consumer (one paged
// consumer list of the mailbox stream) and the indexer's lag.
func (g *Gateway) nodes(ctx context.Context) (NodesResult, error) {
	res := NodesResult{Time: time.Now().UTC(), Nodes: []NodeInfo{}, Unheld: []PartitionInfo{}, Partitions: g.names.Partitions()}
	bucket, err := g.conn.JetStream().KeyValue(ctx, g.names.PlaceBucket())
	if err != nil {
		return res, fmt.Errorf("nodes: placement bucket %s: %w", g.names.PlaceBucket(), err)
	}
	w, err := bucket.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return res, fmt.Errorf("nodes: placement bucket %s: %w", g.names.PlaceBucket(), err)
	}
	defer func() { _ = w.Stop() }()
	byID := map[string]*NodeInfo{}
	var leases []PartitionInfo
	for n := 0; ; n++ {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("nodes: placement bucket %s: %w", g.names.PlaceBucket(), ctx.Err())
		case e = <-w.Updates():
		}
		if e == nil || n >= maxNodeView {
			break // the current values are all in (or enough of them)
		}
		key := e.Key()
		if id, ok := g.names.NodeOfKey(key); ok {
			var d nodeDoc
			if codec.Unmarshal(e.Value(), &d) != nil {
				continue
			}
			if d.ID == "" {
				d.ID = id
			}
			byID[d.ID] = &NodeInfo{ID: d.ID, Kinds: d.Kinds, Started: d.Started, Beat: d.Beat, Partitions: []PartitionInfo{}}
			continue
		}
		kind, num, ok := g.names.LeaseOfKey(key)
		if !ok {
			continue
		}
		p := PartitionInfo{Kind: kind, Partition: num}
		var d leaseDoc
		if len(e.Value()) > 0 && codec.Unmarshal(e.Value(), &d) == nil {
			p.Node, p.Since = d.Node, d.Since
		}
		leases = append(leases, p)
	}
	counts, countsErr := g.partitionCounts(ctx)
	for _, p := range leases {
		nd := byID[p.Node]
		if p.Node == "" || nd == nil {
			res.Unheld = append(res.Unheld, p)
			continue
		}
		if c, ok := counts[g.names.PartitionConsumer(p.Kind, p.Partition)]; ok {
			p.Done, p.Pending = c.Done, c.Pending
		} else if countsErr != nil {
			p.Error = countsErr.Error()
		} else {
			p.Error = "no consumer for this partition in " + g.names.PartitionStream(p.Partition)
		}
		nd.Partitions = append(nd.Partitions, p)
		nd.Done += p.Done
		nd.Pending += p.Pending
	}
	byPart := func(a, b PartitionInfo) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	}
	for _, nd := range byID {
		slices.SortFunc(nd.Partitions, byPart)
		res.Nodes = append(res.Nodes, *nd)
	}
	slices.SortFunc(res.Nodes, func(a, b NodeInfo) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(res.Unheld, byPart)
	if lag, err := g.store.IndexLag(ctx); err != nil {
		res.IndexLagError = err.Error()
	} else {
		res.IndexLag = lag
	}
	return res, nil
}

// partitionCounts reads the counts of every consumer of the mailbox
// streams (the partition consumers; with stream groups each on its group's
// stream), by name, through the paged consumer lists: a few requests per
// stream, whatever the number of partitions.
func (g *Gateway) partitionCounts(ctx context.Context) (map[string]PartitionInfo, error) {
	out := map[string]PartitionInfo{}
	for _, name := range g.names.MailboxStreams() {
		st, err := g.conn.JetStream().Stream(ctx, name)
		if err != nil {
			return out, fmt.Errorf("mailbox stream %s: %w", name, err)
		}
		list := st.ListConsumers(ctx)
		for info := range list.Info() {
			out[info.Name] = PartitionInfo{Done: info.AckFloor.Consumer, Pending: info.NumPending + uint64(info.NumAckPending)}
		}
		if err := list.Err(); err != nil {
			return out, fmt.Errorf("consumers of %s: %w", name, err)
		}
	}
	return out, nil
}
