package actor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// Stray records: a publish to a mailbox subject with a wildcard token
// (ea.mbox.counter.* or ea.mbox.counter.>) matches the mailbox stream's
// subjects but not its subject transform, so it is stored as sent, under no
// partition, and no partition consumer ever reads it. The nodes hosting a
// kind read those of the kind through one shared durable consumer per kind
// ([bus.Names.StrayConsumer], filtered on <prefix>.mbox.<kind>.>, which no
// partitioned subject matches) and send each to dead letters (reason
// bad_subject) under <prefix>.dead.<kind>._, so that nothing is stored that
// nobody processes, without a word. Like any record, a stray of a kind no
// node hosts waits for one; a kind that is all digits has no such consumer
// (its filter would match a partition), nor does a wildcard kind
// (<prefix>.mbox.*.x), which no node can host.

// consumeStrays starts reading the stray records of kind; stop the result
// with Drain and wait for Closed. It returns nil, nil for a kind whose
// strays cannot be told from partitioned records (all digits).
func (n *Node) consumeStrays(ctx context.Context, kind string) (jetstream.ConsumeContext, error) {
	filter, ok := n.names.StrayFilter(kind)
	if !ok || n.names.Groups() > 1 {
		// With stream groups the account mapping stores a wildcard publish
		// under a partition, whose reader dead-letters it (partition.go).
		return nil, nil
	}
	cons, err := n.streams[0].CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       n.names.StrayConsumer(kind),
		Description:   "records published to a mailbox subject of this kind with a wildcard token: stored under no partition, dead-lettered by nodes",
		FilterSubject: filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       handAckWait(n.opts),
		MaxAckPending: 64,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", n.names.StrayConsumer(kind), err)
	}
	cc, err := cons.Consume(n.stray, jetstream.PullMaxMessages(16))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", n.names.StrayConsumer(kind), err)
	}
	return cc, nil
}

// stray dead-letters one stray record and acknowledges it; on failure it is
// redelivered after a while.
func (n *Node) stray(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return
	}
	kind := "_"
	if tokens := strings.Split(msg.Subject(), "."); len(tokens) >= 3 && records.ValidateKind(tokens[2]) == nil {
		kind = tokens[2]
	}
	ctx, cancel := context.WithTimeout(n.runCtx, handAckWait(n.opts))
	defer cancel()
	why := fmt.Errorf("mailbox subject %q has a wildcard token: no effector has it (ids are 1-128 of A-Z a-z 0-9 _ -); publish to %s with the id itself",
		msg.Subject(), n.names.Mailbox(records.Ref{Kind: kind, ID: "<id>"}))
	err = n.deadLetter(ctx, n.names.StrayDead(kind), stored{
		stream: n.names.MailboxStreamOf(0), subject: msg.Subject(), seq: meta.Sequence.Stream,
		header: msg.Headers(), data: msg.Data(),
	}, reasonBadSubject, why)
	if err != nil {
		n.log.Warn("dead-letter a stray record; will retry", "subject", msg.Subject(), "seq", meta.Sequence.Stream, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
	n.metrics.dead.WithLabelValues(kind, reasonBadSubject).Inc()
	n.log.Warn("record sent to dead letters", "subject", msg.Subject(), "seq", meta.Sequence.Stream, "reason", reasonBadSubject, "err", why)
}
