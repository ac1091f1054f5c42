package actor

import (
	"context"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream groups (bus.Config.Groups, docs/layout.md): a deployment's
// partitions may be spread over several mailbox streams and state buckets,
// partition p in group p mod G. The node opens every group's stream and
// bucket and reads each partition from its group's.

// openGroups opens the mailbox stream and state bucket of every stream
// group: with one group, EA_MBOX and ea_state as always.
func openGroups(ctx context.Context, conn *bus.Conn) ([]jetstream.Stream, []jetstream.KeyValue, error) {
	g := conn.Names().Groups()
	streams := make([]jetstream.Stream, g)
	for i := range streams {
		s, err := conn.MailboxStreamOf(ctx, i)
		if err != nil {
			return nil, nil, err
		}
		streams[i] = s
	}
	buckets, err := stateBuckets(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	return streams, buckets, nil
}

// stateBuckets opens the state bucket of every stream group.
func stateBuckets(ctx context.Context, conn *bus.Conn) ([]jetstream.KeyValue, error) {
	if conn.Names().Groups() == 1 {
		b, err := conn.StateBucket(ctx)
		if err != nil {
			return nil, err
		}
		return []jetstream.KeyValue{b}, nil
	}
	return conn.StateBuckets(ctx)
}

// streamOf is the mailbox stream that holds partition num.
func (n *Node) streamOf(num int) jetstream.Stream { return n.streams[n.names.Group(num)] }

// streamFor is the mailbox stream that holds ref's mailbox.
func (n *Node) streamFor(ref records.Ref) jetstream.Stream {
	return n.streams[n.names.GroupOf(ref)]
}

// streamNameOf is the name of the mailbox stream that holds partition num
// (and its consumers: the partition's and its effectors' own).
func (n *Node) streamNameOf(num int) string { return n.names.PartitionStream(num) }
