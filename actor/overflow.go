package actor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Overflow: an effector whose backlog would hold up its partition reads the
// rest of its mailbox itself.
//
// A partition consumer's window (Kind.Window) is shared by every effector of
// the partition. When one effector holds Kind.Overflow records (its logic is
// slow, or a burst came for it), the node creates a durable consumer on that
// effector's mailbox alone, starting at the oldest record it has not applied
// (held, or in a batch in flight: the one after its state's seq), and from
// then on the partition acknowledges that effector's records as it meets
// them (dropping them: the effector's own consumer delivers them again, in
// order) and moves on. The effector's own consumer is its only source while
// it overflows, so it still applies its records one at a time in stream
// order. Its existence is the durable mark: the consumer is created before
// the partition acknowledges any record it did not apply, and a node that
// opens the partition (after a crash, say) finds it and reads from it. Only
// the partition's current reader drops records or deletes the consumer (see
// "Drops" in drop.go).
//
// Leaving: once its own consumer has nothing pending and nothing is held,
// the effector parks what the partition delivers from then on, notes the
// mailbox's last sequence, applies up to it from its own consumer, deletes
// that consumer and takes the parked records. A crash at any point leaves
// either the consumer (read again from its ack floor) or only unacknowledged
// partition records (read again from the partition's ack floor).

// overflow is an effector reading its own mailbox. Its fields are guarded
// by the effector's mu, except cc, set once before deliveries start.
type overflow struct {
	name     string
	cc       jetstream.ConsumeContext
	next     uint64 // the consumer sequence of its next delivery
	caughtUp bool   // the last delivery had nothing pending behind it
	lost     bool   // a gap in its consumer sequences: another reader took records
	draining bool   // leaving: the partition's deliveries are parked
	// droppedMax is the highest sequence the partition acknowledged without
	// the effector applying it (its own consumer delivers it): leaving waits
	// until the document's seq reaches it.
	droppedMax uint64
	parked     []delivery // while draining: what the partition delivered
	// checking is set while checkOwn asks whether the consumer exists.
	checking atomic.Bool
}

// overflowPrefix is the name prefix of the own consumers of partition num of
// kind: <kind>~p<num>~o.
func (n *Node) overflowPrefix(kind string, num int) string {
	return n.names.PartitionConsumer(kind, num) + "~o"
}

// overflowName is the durable name of ref's own consumer.
func (n *Node) overflowName(ref records.Ref) string {
	sum := sha256.Sum256([]byte(ref.ID))
	return n.overflowPrefix(ref.Kind, n.names.Partition(ref)) + hex.EncodeToString(sum[:12])
}

// metaEffector is the consumer metadata key naming the effector an own
// consumer belongs to; metaNode names the node that made it, so that two
// nodes that both believe they read the partition cannot both make it (the
// second creation differs, and fails).
const (
	metaEffector = "effector"
	metaNode     = "node"
)

// overflowing reports whether e must read its own mailbox now: it holds
// Kind.Overflow records and does not yet. The caller holds e.mu.
func (e *effector) overflowing() bool {
	return e.ovf == nil && e.kind.overflow > 0 && len(e.held) >= e.kind.overflow && !e.stopped
}

// startOverflow makes e read its own mailbox from the oldest record it has
// not applied. It runs on the partition's goroutine: no record of the
// partition is dispatched meanwhile.
func (e *effector) startOverflow(ctx context.Context) error {
	e.mu.Lock()
	from := uint64(0)
	for _, d := range e.held {
		if from == 0 || d.seq < from {
			from = d.seq
		}
	}
	e.mu.Unlock()
	if from == 0 {
		return nil
	}
	n := e.node
	// Start no later than the record after the last one applied: records
	// of a batch in flight are not held, and if that batch fails they come
	// again through the partition, which would drop them from now on.
	ent, err := n.loadState(ctx, e.ref)
	switch {
	case err == nil && ent.Revision != 0 && ent.Value.Seq+1 < from:
		from = ent.Value.Seq + 1
	case err != nil && !errors.Is(err, kv.ErrNotFound):
		return fmt.Errorf("own consumer of %s: read its state: %w", e.ref, err)
	}
	cfg := e.ownConsumerConfig()
	cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	cons, err := n.streamFor(e.ref).CreateConsumer(ctx, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another node made it: it reads this partition too, so this
		// node's reading is stale. Read the partition again (which finds
		// the own consumer) rather than acknowledge anything here.
		e.part.fail()
		return fmt.Errorf("own consumer of %s exists already (another reader of the partition made it): reading the partition again", e.ref)
	}
	if err != nil {
		return fmt.Errorf("own consumer of %s: %w", e.ref, err)
	}
	// The own consumer exists: what the partition holds for the effector may
	// be acknowledged, its own consumer delivers it again; and from now on
	// the partition drops the effector's records.
	ovf := &overflow{name: cfg.Durable, next: 1}
	e.mu.Lock()
	held := e.held
	for _, d := range held {
		ovf.droppedMax = max(ovf.droppedMax, d.seq)
	}
	e.held = nil
	e.maxSeen = from - 1 // nothing from `from` on is held any more
	e.ovf = ovf
	e.mu.Unlock()
	for _, d := range held {
		e.part.drop(ctx, d.msg)
	}
	n.metrics.overflows.WithLabelValues(e.ref.Kind).Inc()
	e.logger().Info("backlog too deep for its partition: reading its own mailbox", "from", from, "held", len(held))
	if err := e.consumeOwn(cons, ovf); err != nil {
		e.part.fail() // whoever opens the partition reads from the own consumer
		return err
	}
	return nil
}

// ownConsumerConfig is the configuration of e's own consumer.
func (e *effector) ownConsumerConfig() jetstream.ConsumerConfig {
	n := e.node
	return n.fenced(jetstream.ConsumerConfig{
		Durable:       n.overflowName(e.ref),
		Description:   "own reading of the mailbox of " + e.ref.String() + " while its backlog is deep",
		FilterSubject: n.names.StoredMailbox(e.ref),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       e.kind.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: e.kind.window,
		Replicas:      n.conn.Config().Replicas,
		Metadata:      map[string]string{metaEffector: e.ref.String(), metaNode: n.opts.NodeID},
	})
}

// consumeOwn starts consuming e's own consumer, described by ovf, which is
// already e.ovf.
func (e *effector) consumeOwn(cons jetstream.Consumer, ovf *overflow) error {
	cc, err := cons.Consume(e.deliverOwn, e.node.pullOpts(cons.CachedInfo(), e.kind.window,
		func(_ jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
				e.ownGone(ovf, err)
			case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoHeartbeat):
				// A consumer deleted while no request of ours waited on it
				// shows only as requests nobody answers: ask whether it
				// is there, or the partition would go on dropping this
				// effector's records for a consumer that no longer exists.
				e.checkOwn(cons, ovf)
			}
		})...)
	if err != nil {
		return fmt.Errorf("read own consumer of %s: %w", e.ref, err)
	}
	e.mu.Lock()
	ovf.cc = cc
	stopped := e.stopped
	e.mu.Unlock()
	if stopped { // stopped meanwhile: stop does not see cc set after it looked
		cc.Stop()
	}
	return nil
}

// ownGone gives the partition up when e's own consumer, described by ovf,
// is gone while e still reads it (not deleted by e leaving): reading the
// partition again finds out what is left.
func (e *effector) ownGone(ovf *overflow, err error) {
	e.mu.Lock()
	gone := e.ovf == ovf && !ovf.draining
	e.mu.Unlock()
	if gone {
		e.logger().Warn("own consumer gone; reading the partition again", "err", err)
		e.part.fail()
	}
}

// checkOwn asks the server, on a goroutine of its own (one at a time,
// counted in drainers), whether e's own consumer cons still exists, and
// calls ownGone if not.
func (e *effector) checkOwn(cons jetstream.Consumer, ovf *overflow) {
	e.mu.Lock()
	if e.stopped || !ovf.checking.CompareAndSwap(false, true) {
		e.mu.Unlock()
		return
	}
	e.drainers.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.drainers.Done()
		defer ovf.checking.Store(false)
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		defer cancel()
		if _, err := cons.Info(ctx); errors.Is(err, jetstream.ErrConsumerNotFound) {
			e.ownGone(ovf, err)
		}
	}()
}

// deliverOwn receives a record from e's own consumer.
func (e *effector) deliverOwn(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	e.mu.Lock()
	ovf := e.ovf
	if ovf == nil || e.stopped || ovf.lost {
		e.mu.Unlock()
		return // left unacknowledged for whoever reads next
	}
	if meta.Sequence.Consumer != ovf.next {
		ovf.lost = true
		e.mu.Unlock()
		e.logger().Warn("own consumer sequence gap; reading the partition again", "want", ovf.next, "got", meta.Sequence.Consumer)
		e.part.fail()
		return
	}
	ovf.next++
	ovf.caughtUp = meta.NumPending == 0
	e.mu.Unlock()
	d := delivery{msg: msg, seq: meta.Sequence.Stream, delivered: meta.NumDelivered}
	n := e.node
	d.rec, d.err = records.FromMsg(n.names.Mailbox(e.ref), msg.Headers(), msg.Data())
	d.rec.Subject, d.rec.Seq = n.names.Mailbox(e.ref), d.seq
	if d.rec.ID == "" {
		d.rec.ID = "s" + strconv.FormatUint(d.seq, 10)
	}
	e.hold(d)
}

// leaveOverflow moves e back to its partition once its own consumer has
// caught up; the drain goroutine calls it when nothing is held. It first
// parks what the partition delivers from then on (draining), then waits until
// every record the partition dropped while e overflowed is applied — its own
// consumer delivered them all, as they are in its range — and only then
// deletes the own consumer and takes the parked records.
func (e *effector) leaveOverflow() {
	e.mu.Lock()
	ovf := e.ovf
	if ovf == nil || e.stopped || ovf.lost || len(e.held) > 0 || !ovf.caughtUp {
		e.mu.Unlock()
		return // a lost own consumer is another reader's now: leave it be
	}
	if wait := e.part.leaveIn(); wait > 0 {
		// A former reader of the partition may still drop records (see
		// "Drops"): come back when it no longer can.
		e.mu.Unlock()
		time.AfterFunc(wait, e.wake)
		return
	}
	ovf.draining = true // from now on the partition parks the effector's records
	if e.doc.Seq < ovf.droppedMax {
		e.mu.Unlock()
		return // its own consumer still delivers (or it still applies) a dropped record
	}
	cc := ovf.cc
	e.mu.Unlock()
	// Only the partition's reader may delete the own consumer: one that
	// lost the partition would take it from under the new reader.
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	if !e.part.mayDrop(ctx) {
		if !e.part.failed() {
			time.AfterFunc(dropTrust, e.wake) // the claim is in doubt: try again
		}
		return
	}
	if cc != nil {
		cc.Stop()
	}
	err := e.node.streamFor(e.ref).DeleteConsumer(ctx, ovf.name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		e.logger().Warn("delete own consumer; reading the partition again", "err", err)
		e.part.fail()
		return
	}
	e.mu.Lock()
	e.ovf = nil
	parked := ovf.parked
	if !e.stopped {
		for _, d := range parked {
			e.holdLocked(d) // records at or below seq are skipped when taken
		}
	}
	e.mu.Unlock()
	e.logger().Info("caught up: back to its partition", "seq", e.doc.Seq, "parked", len(parked))
}

// consumerNames lists the consumer names of the mailbox stream: one call
// for every partition a reconcile pass opens.
func (n *Node) consumerNames(ctx context.Context) ([]string, error) {
	var names []string
	for _, stream := range n.streams {
		lister := stream.ConsumerNames(ctx)
		for name := range lister.Name() {
			names = append(names, name)
		}
		if err := lister.Err(); err != nil {
			return nil, fmt.Errorf("list the consumers of %s: %w", stream.CachedInfo().Config.Name, err)
		}
	}
	return names, nil
}

// ownConsumers returns the own consumers of the effectors of partition num
// of kind: those of names (the mailbox stream's consumers) with the
// partition's own prefix, with the configuration of each (it names its
// effector).
func (n *Node) ownConsumers(ctx context.Context, kind string, num int, names []string) ([]*jetstream.ConsumerInfo, error) {
	prefix := n.overflowPrefix(kind, num)
	var out []*jetstream.ConsumerInfo
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		cons, err := n.streamOf(num).Consumer(ctx, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue // its effector caught up and deleted it meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("own consumer %s: %w", name, err)
		}
		out = append(out, cons.CachedInfo())
	}
	return out, nil
}

// recoverOverflows makes the effectors whose own consumers are infos (left
// by a node that read partition p before) read from them, from their ack
// floors, before the partition dispatches anything.
func (p *partition) recoverOverflows(ctx context.Context, infos []*jetstream.ConsumerInfo) error {
	n := p.node
	prefix := n.overflowPrefix(p.kind.name, p.num)
	for _, info := range infos {
		if !strings.HasPrefix(info.Name, prefix) {
			continue
		}
		ref, err := records.ParseRef(info.Config.Metadata[metaEffector])
		if err != nil || n.overflowName(ref) != info.Name {
			p.log.Warn("consumer with an own-consumer name but no effector; leaving it", "consumer", info.Name)
			continue
		}
		// Fence a former reader off and reset, as for the partition.
		next, err := n.resetFenced(ctx, p.num, info.Name, isFenced(info))
		if err != nil {
			return fmt.Errorf("own consumer of %s: %w", ref, err)
		}
		cons, err := n.streamOf(p.num).Consumer(ctx, info.Name)
		if err != nil {
			return fmt.Errorf("own consumer %s: %w", info.Name, err)
		}
		e := p.effector(ref)
		if e == nil {
			return nil // stopping
		}
		ovf := &overflow{name: info.Name, next: next}
		e.mu.Lock()
		e.ovf = ovf
		e.mu.Unlock()
		if err := e.consumeOwn(cons, ovf); err != nil {
			return err
		}
		p.log.Info("effector reads its own mailbox again", "effector", ref.String())
	}
	return nil
}
