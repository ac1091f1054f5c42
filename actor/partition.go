package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// partition reads one partition of one kind's mailboxes (the durable
// consumer <kind>~p<n>, filtered on <prefix>.mbox.<n>.<kind>.*) and
// dispatches its records in-process to the effectors they address, each of
// which applies its own records one at a time in stream order. The node
// reads a partition only while it holds the partition's lease (see
// placement).
//
// Lock order: partition.mu before effector.mu, never the reverse.
type partition struct {
	node  *Node
	kind  *kindSpec
	num   int
	name  string        // the durable consumer's name
	lease uint64        // the revision of the lease it is read under
	epoch atomic.Uint64 // the node's lapse count it is read under (fence.go, "Lapses")
	log   *slog.Logger
	// opened is when it was prepared, after its lease was taken from another
	// node; zero when no other node read it last (drop.go, "Drops").
	opened time.Time

	mu        sync.Mutex // guards the fields below
	cc        jetstream.ConsumeContext
	effectors map[string]*effector // by id: the effectors loaded
	next      uint64               // the consumer sequence the next delivery must have
	stopped   bool
	lost      bool // a gap in consumer sequences: another reader took records
	// verified is when the lease was last read at the server as the one the
	// partition is read under; deferred are the drops it had to put off
	// (drop.go, "Drops").
	verified time.Time
	deferred []jetstream.Msg
	flush    *time.Timer // flushes deferred later; stopped by halt
}

// consumerConfig is the durable consumer of partition num of kind k.
func (n *Node) consumerConfig(k *kindSpec, num int) jetstream.ConsumerConfig {
	return n.fenced(jetstream.ConsumerConfig{
		Durable:       n.names.PartitionConsumer(k.name, num),
		Description:   fmt.Sprintf("partition %d of the mailboxes of kind %s", num, k.name),
		FilterSubject: n.names.PartitionFilter(k.name, num),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       k.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: k.window,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      n.conn.Config().Replicas,
	})
}

// preparePartition makes partition num of kind k ready to be read under
// the lease revision lease: it makes sure the durable consumer exists,
// fences any former reader off at the server (unpin, see fence.go) and
// resets the consumer to its ack floor, so whatever a former reader held but
// did not acknowledge comes again, in order. [partition.start] then starts
// reading it.
func (n *Node) preparePartition(ctx context.Context, k *kindSpec, num int, lease uint64) (*partition, jetstream.Consumer, error) {
	epoch := n.claim.epoch() // before the reset: a lapse after it must not go unseen
	cfg := n.consumerConfig(k, num)
	cons, err := n.streamOf(num).CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("consumer %s: %w", cfg.Durable, err)
	}
	// Fence former readers off (unpin) and reset. A delivery to anyone
	// else after that shows as a gap before this reading's first one (see
	// resetFenced and deliver).
	next, err := n.resetFenced(ctx, num, cfg.Durable, true)
	if err != nil {
		return nil, nil, err
	}
	part := &partition{
		node: n, kind: k, num: num, name: cfg.Durable,
		log:       n.log.With("partition", cfg.Durable),
		effectors: map[string]*effector{},
		next:      next,
		lease:     lease,
		opened:    time.Now(),
	}
	part.epoch.Store(epoch)
	return part, cons, nil
}

// start starts reading a prepared partition from its consumer cons.
// Effectors of the partition that read their own mailbox (see overflow.go)
// go on doing so before the partition dispatches: names are the consumer
// names of the mailbox stream, listed after the partition's reset. (A former
// reader that has not noticed it lost the partition may make an own
// consumer until the reset, and acknowledge on the partition the records it
// holds; those acknowledged before the reset are not delivered again, and
// only that own consumer has them. Records it acknowledges after the reset
// were delivered again to this reader by the reset.) On an error the
// partition is stopped.
func (p *partition) start(ctx context.Context, cons jetstream.Consumer, names []string) error {
	n := p.node
	owns, err := n.ownConsumers(ctx, p.kind.name, p.num, names)
	if err == nil {
		err = p.recoverOverflows(ctx, owns)
	}
	if err != nil {
		p.stop(0)
		return err
	}
	cc, err := cons.Consume(p.deliver, n.pullOpts(cons.CachedInfo(), p.kind.window,
		func(_ jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
				p.log.Info("consumer gone; opening the partition again", "err", err)
				p.fail()
			case errors.Is(err, jetstream.ErrPinIDMismatch):
				// Unpinned: another node took the partition (its lease
				// says so soon), or one that lost it unpinned it on its way
				// out; nats.go asks again without a pin id.
				p.log.Debug("consume: unpinned", "err", err)
			case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoHeartbeat):
				p.log.Debug("consume", "err", err) // nats.go keeps pulling once the server is back
			default:
				p.log.Debug("consume", "err", err)
			}
		})...)
	if err != nil {
		p.stop(0)
		return fmt.Errorf("consume %s: %w", p.name, err)
	}
	p.mu.Lock()
	p.cc = cc
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		cc.Stop()
	}
	return nil
}

// failed reports whether the partition must be opened again.
func (p *partition) failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// fail gives the partition up so placement opens it again (reset to the
// ack floor): its consumer was deleted, or another reader took records.
func (p *partition) fail() {
	p.mu.Lock()
	if p.lost || p.stopped {
		p.mu.Unlock()
		return
	}
	p.lost = true
	p.mu.Unlock()
	p.node.place.Load().reopen(p)
}

// deliver receives a record from the consumer and hands it to its effector.
func (p *partition) deliver(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		p.log.Error("record without JetStream metadata; leaving it for redelivery", "err", err)
		return
	}
	p.mu.Lock()
	if p.stopped || p.lost {
		p.mu.Unlock()
		return // left unacknowledged for whoever reads next
	}
	if meta.Sequence.Consumer != p.next {
		// Another reader took the deliveries in between (a node that read
		// the partition before and has not noticed it lost it), or the
		// consumer was reset under us: what follows could skip records.
		p.mu.Unlock()
		p.log.Info("consumer sequence gap: another reader took records; opening the partition again", "want", p.next, "got", meta.Sequence.Consumer)
		p.fail()
		return
	}
	p.next++
	p.mu.Unlock()

	d := delivery{msg: msg, seq: meta.Sequence.Stream, delivered: meta.NumDelivered}
	n := p.node
	ref, num, ok := n.names.StoredMailboxOf(msg.Subject())
	switch {
	case !ok || ref.Kind != p.kind.name || num != p.num:
		p.stray(d, ref, reasonBadSubject, fmt.Errorf("subject %q is not a mailbox of partition %d of kind %s", msg.Subject(), p.num, p.kind.name))
		return
	case ref.Validate() != nil:
		p.stray(d, ref, reasonBadSubject, fmt.Errorf("mailbox subject %q: %w", msg.Subject(), ref.Validate()))
		return
	case n.names.Partition(ref) != num:
		p.stray(d, ref, reasonBadSubject, fmt.Errorf("subject %q names partition %d, but %s belongs to partition %d: publish to %s", msg.Subject(), num, ref, n.names.Partition(ref), n.names.Mailbox(ref)))
		return
	}
	d.rec, d.err = records.FromMsg(n.names.Mailbox(ref), msg.Headers(), msg.Data())
	d.rec.Subject, d.rec.Seq = n.names.Mailbox(ref), d.seq
	if d.rec.ID == "" {
		d.rec.ID = "s" + strconv.FormatUint(d.seq, 10)
	}
	for {
		e := p.effector(ref)
		if e == nil {
			return // stopping
		}
		ok, overflow, drop := e.deliver(d)
		if drop {
			p.drop(n.runCtx, msg) // its own consumer delivers it
		} else {
			p.flushDrops(n.runCtx)
		}
		if overflow {
			ctx, cancel := context.WithTimeout(n.runCtx, 10*time.Second)
			if err := e.startOverflow(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("could not give the effector a reading of its own; it keeps its records in the partition's window", "effector", ref.String(), "err", err)
			}
			cancel()
		}
		if ok {
			return
		}
		p.forget(ref.ID, e) // passivated meanwhile: load it again
	}
}

// effector returns the loaded effector ref, loading it (lazily: its state
// document is read by its drain goroutine) when it is passive; nil once the
// partition stopped, or when it is passive and the partition was given up.
func (p *partition) effector(ref records.Ref) *effector {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	if e := p.effectors[ref.ID]; e != nil {
		return e
	}
	if p.lost {
		// Given up, to be read again from the ack floor: a new effector
		// here would not know the records an effector stopped meanwhile
		// took and did not apply, and could move the document's seq past
		// them (advanceWith).
		return nil
	}
	n := p.node
	ctx, cancel := context.WithCancel(n.runCtx)
	e := &effector{
		node: n, part: p, kind: p.kind, ref: ref, km: n.metrics.forKind(ref.Kind),
		key: n.names.StateKey(ref),
		ctx: ctx, cancel: cancel,
		lastActive: time.Now(),
	}
	p.effectors[ref.ID] = e
	n.metrics.active.WithLabelValues(ref.Kind).Inc()
	return e
}

// forget drops e from the loaded effectors if it is still there.
func (p *partition) forget(id string, e *effector) {
	p.mu.Lock()
	if p.effectors[id] == e {
		delete(p.effectors, id)
		p.node.metrics.active.WithLabelValues(p.kind.name).Dec()
	}
	p.mu.Unlock()
}

// stray sends a record no effector can take to dead letters and
// acknowledges it. It runs on the partition's delivery callback, so it tries
// once, briefly: when the dead letter cannot be written, the record is
// handed back to the server for a later delivery (a delayed nak) rather
// than holding up every effector of the partition while NATS recovers.
func (p *partition) stray(d delivery, ref records.Ref, reason string, why error) {
	n := p.node
	ctx, cancel := context.WithTimeout(n.runCtx, strayTry)
	defer cancel()
	subject := n.names.StrayDead(p.kind.name)
	if ref.Validate() == nil {
		subject = n.names.Dead(ref)
	}
	err := n.deadLetter(ctx, subject, stored{
		stream: n.streamNameOf(p.num), subject: d.msg.Subject(), seq: d.seq,
		header: d.msg.Headers(), data: d.msg.Data(),
	}, reason, why)
	if err != nil {
		p.log.Warn("dead-letter a stray record: failed; it comes again later", "seq", d.seq, "in", strayRetry, "err", err)
		_ = d.msg.NakWithDelay(strayRetry)
		return
	}
	_ = d.msg.Ack()
	n.metrics.dead.WithLabelValues(p.kind.name, reason).Inc()
	p.log.Warn("record sent to dead letters", "subject", d.msg.Subject(), "seq", d.seq, "reason", reason, "err", why)
}

// strayTry bounds a stray record's dead-letter write on the delivery
// callback; strayRetry is when a record whose write failed comes again.
const (
	strayTry   = 2 * time.Second
	strayRetry = time.Second
)

// passivate drops the effectors idle for at least idle from memory: they
// cost nothing until their next record loads them again.
func (p *partition) passivate(now time.Time, idle time.Duration) {
	p.mu.Lock()
	var gone []*effector
	for id, e := range p.effectors {
		if e.idleSince(now) < idle {
			continue
		}
		e.mu.Lock()
		busy := e.running || len(e.held) > 0 || e.ovf != nil
		if !busy {
			e.stopped = true
		}
		e.mu.Unlock()
		if busy {
			continue
		}
		delete(p.effectors, id)
		gone = append(gone, e)
	}
	p.mu.Unlock()
	for _, e := range gone {
		e.cancel()
		p.node.metrics.active.WithLabelValues(p.kind.name).Dec()
		p.node.metrics.passivations.WithLabelValues(p.kind.name).Inc()
	}
}

// stop stops reading the partition: no more deliveries, the records in hand
// finish (up to grace) and the records held stay unacknowledged for the next
// reader.
func (p *partition) stop(grace time.Duration) {
	if p.node.conn.State() != bus.StateConnected {
		// Records in hand cannot finish without NATS: waiting for them
		// would only hold the caller up (their next reader gets them again).
		grace = 0
	}
	p.halt()
	p.mu.Lock()
	cc := p.cc
	all := p.effectors
	p.effectors = map[string]*effector{}
	p.mu.Unlock()
	if cc != nil {
		select {
		case <-cc.Closed():
		case <-time.After(grace):
		}
	}
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Go(func() {
			e.stop(grace)
			p.node.metrics.active.WithLabelValues(p.kind.name).Dec()
		})
	}
	wg.Wait()
}

// halt stops the partition's deliveries at once: no record is dispatched
// from now on. The records in hand go on; stop waits for them.
func (p *partition) halt() {
	p.mu.Lock()
	p.stopped = true
	cc := p.cc
	if p.flush != nil {
		p.flush.Stop()
		p.flush = nil
	}
	p.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

// ownConsumers names the own consumers its effectors read right now (see
// overflow.go).
func (p *partition) ownConsumers() []string {
	var out []string
	for _, e := range p.loaded() {
		e.mu.Lock()
		if e.ovf != nil {
			out = append(out, e.ovf.name)
		}
		e.mu.Unlock()
	}
	return out
}

// loaded returns the effectors loaded right now.
func (p *partition) loaded() []*effector {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*effector, 0, len(p.effectors))
	for _, e := range p.effectors {
		out = append(out, e)
	}
	return out
}

// lookup returns the loaded effector id, or nil.
func (p *partition) lookup(id string) *effector {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effectors[id]
}
