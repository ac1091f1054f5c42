package actor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Fencing: when a partition's lease moves, the server itself stops serving
// the former reader, whatever that reader does (it crashed, froze, was cut
// off, or came back without having seen its lease taken).
//
// The danger is a reader that cannot act: a frozen process (SIGSTOP, a GC
// pause, a stopped VM) or one behind a network cut the server has not
// noticed keeps its pull requests waiting on the server, and a lease in a KV
// bucket does not stop the server from serving them. Measured with 3
// ea-node processes and one frozen past the TTL, before this fence: the new
// owner reset the consumer, the server served the frozen node's waiting pull
// (10s expiry, 256 messages) first, the new owner saw a consumer sequence
// gap, reset again, and so on until the stale pull filled or expired:
// processing of the taken-over partitions came back 5–6.5s after the stop
// with a 2s TTL, and most counters not before the frozen node resumed.
//
// Two server-side mechanisms together fence the old reader:
//
//   - Every partition consumer (and every effector's own consumer, see
//     overflow.go) is a pinned-client priority group (nats-server 2.11+,
//     PriorityPolicy pinned_client, group [readerGroup]): the server serves
//     one client, the pinned one, and refuses the pull requests of any other
//     (a request carrying an old pin id is answered 423 and dropped; one
//     without an id waits, unserved, while a pin is set). A node taking the
//     partition unpins it before resetting it to the ack floor
//     ([Node.unpin]), so the old reader's requests, which carry its pin id,
//     are dropped, and the new reader's first request gets the pin. A node
//     that stops reading a partition because its lease moved unpins it too:
//     a request of its own the server pinned after the new owner's unpin
//     must not hold the partition until the pin's TTL. An unpin is cheap
//     for a healthy pinned reader: its next request is answered 423 and it
//     asks again, no message is lost or reordered.
//   - Pull requests expire inside the lease TTL ([pullExpiry]: the TTL
//     minus one beat, 1s to 10s; 2s with the defaults). A frozen node's
//     requests are gone from the server by the time the others can declare
//     it dead (TTL minus a beat after its last heartbeat at the earliest),
//     so none is left to take the pin after the takeover. (Half that
//     expiry cost twice the idle pull traffic, which slowed a loaded
//     machine's nodes: every partition consumer asks again at every
//     expiry. Its idle heartbeat comes every [pullHeartbeat].) That closes the one
//     gap of the pinned group: a request sent before its reader learnt its
//     pin id (an idle partition) carries no id, and the server would pin it.
//     A healthy reader asks again at every expiry, which also keeps its pin
//     alive: the pin's own TTL ([pinnedTTL], the lease TTL, at least two
//     expiries) only ever ends a pin whose holder stopped asking.
//   - A former reader that is alive and has not yet seen its lease move
//     also sends requests without a pin id (its next one after a 423), and
//     the server may pin one of them after the new reader's unpin. What it
//     then gets is caught by the consumer sequences: a reset starts them
//     again at 1, so the new reader sees a gap before its first delivery
//     and reads the partition again. The reset's answer must show nothing
//     delivered yet for that to hold ([Node.resetFenced]).
//
// Alternatives considered: a new consumer per lease epoch fences hardest
// (deleting the old consumer drops its requests), but it changes the
// consumer's name at every takeover (tools and dashboards find partition
// consumers by name), costs a create and a delete per takeover and loses
// the acknowledgements above the ack floor; short expiries alone bound a
// frozen reader but not a resumed one, which reads again, unfenced, until
// it sees its lease gone.

// readerGroup is the priority group every reader of a partition (or of an
// effector's own consumer) pulls in.
const readerGroup = "reader"

// pullExpiry is how long a pull request waits on the server: well inside
// the lease TTL, so that a frozen reader's requests are gone before the
// others can take its partitions (see Fencing above). nats.go allows no less
// than 1s.
func pullExpiry(o Options) time.Duration {
	return min(max(o.HeartbeatTTL-o.Heartbeat, time.Second), 10*time.Second)
}

// pullHeartbeat is how often the server tells a reader whose pull request
// waits that the request is still there. Two missed in a row and nats.go
// sends a new request: that is how a reader learns that the server holding
// its request is gone (a consumer leader killed, DESIGN.md section 6: the
// cluster's own events), so it bounds how long a partition waits after the
// consumer has a leader again (measured: at 1s, up to 2.2s after the
// election; at 500ms, within a second). A heartbeat is sent only while a
// request waits with nothing to deliver, so a busy partition gets none.
const pullHeartbeat = 500 * time.Millisecond

// pinnedTTL is how long the server keeps a reader pinned without hearing a
// pull request from it: the lease TTL, and at least two pull expiries, as a
// healthy reader asks again at every expiry.
func pinnedTTL(o Options) time.Duration {
	return max(o.HeartbeatTTL, 2*pullExpiry(o))
}

// fenced adds the pinned-client priority group to a consumer configuration.
func (n *Node) fenced(cfg jetstream.ConsumerConfig) jetstream.ConsumerConfig {
	cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
	cfg.PriorityGroups = []string{readerGroup}
	cfg.PinnedTTL = pinnedTTL(n.opts)
	return cfg
}

// isFenced reports whether the consumer described by info pulls in
// [readerGroup] (an own consumer made before fencing does not).
func isFenced(info *jetstream.ConsumerInfo) bool {
	return info != nil && info.Config.PriorityPolicy == jetstream.PriorityPolicyPinned &&
		slices.Contains(info.Config.PriorityGroups, readerGroup)
}

// pullOpts are the options of a reader's Consume on a consumer described by
// info: a window of batch records, short pull requests, and the reader
// group when the consumer has it.
func (n *Node) pullOpts(info *jetstream.ConsumerInfo, batch int, onErr jetstream.ConsumeErrHandler) []jetstream.PullConsumeOpt {
	exp := pullExpiry(n.opts)
	opts := []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(batch),
		jetstream.PullExpiry(exp), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(onErr),
	}
	if isFenced(info) {
		opts = append(opts, jetstream.PullPriorityGroup(readerGroup))
	}
	return opts
}

// errCodeNoSuchGroup is JetStream's error for a priority group the consumer
// does not have (JSConsumerInvalidPriorityGroupErr); nats.go names no
// constant for it.
const errCodeNoSuchGroup jetstream.ErrorCode = 10160

// unpin ends the pin of consumer's reader group (a consumer of the stream
// of partition num), so the server serves no request of the former reader
// from now on and pins the next request without a pin id. A consumer without the group (made before fencing) has
// nothing to unpin.
func (n *Node) unpin(ctx context.Context, num int, consumer string) error {
	err := n.streamOf(num).UnpinConsumer(ctx, consumer, readerGroup)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeNoSuchGroup {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unpin consumer %s: %w", consumer, err)
	}
	return nil
}

// resetTries is how many times [Node.resetFenced] unpins and resets a
// consumer that served a former reader between its reset and the reset's
// answer, before it gives up (the next placement pass tries again).
const resetTries = 5

// resetFenced fences the former readers of consumer (of the stream of
// partition num) off and resets it to its ack floor, so that whatever they
// held and did not acknowledge comes again, in order; fenced says whether the
// consumer pulls in [readerGroup] (an own consumer made before fencing does
// not). It returns the consumer sequence the next delivery must have.
//
// A reset starts the consumer's delivery sequence again at 1, and the
// answer shows the consumer as it is when the server answers, which is
// after the reset: a delivery made in between went to a request of a former
// reader that the server pinned after the unpin (one sent without a pin id,
// as a reader sends after a 423 of an earlier takeover). Reading on from
// there would miss those records with no gap in the consumer sequences to
// show it, and an effector would take a later record for proof that every
// record below it was delivered here (commit.go, advanceWith) and skip them
// for good when they came again. So a reset whose answer shows a delivery
// is done again, after another unpin (which ends the pin that request got),
// until one answers with none.
func (n *Node) resetFenced(ctx context.Context, num int, consumer string, fenced bool) (uint64, error) {
	for try := 1; ; try++ {
		if fenced {
			if err := n.unpin(ctx, num, consumer); err != nil {
				return 0, err
			}
		}
		res, err := n.conn.JetStream().ResetConsumer(ctx, n.streamNameOf(num), consumer)
		if err != nil {
			return 0, fmt.Errorf("reset consumer %s to its ack floor: %w", consumer, err)
		}
		if res.ConsumerInfo != nil && res.ConsumerInfo.Delivered.Consumer == 0 {
			return 1, nil
		}
		what := "no consumer state" // cannot tell: as unsafe as a delivery
		if res.ConsumerInfo != nil {
			what = fmt.Sprintf("%d delivered", res.ConsumerInfo.Delivered.Consumer)
		}
		if try == resetTries {
			return 0, fmt.Errorf("reset consumer %s to its ack floor: %d times in a row, its answer showed records delivered to another reader (%s the last time): a former reader still pulls", consumer, resetTries, what)
		}
		n.log.Info("a former reader got records right after the reset: fencing it off and resetting again", "consumer", consumer, "answer", what)
		if !sleep(ctx, time.Duration(try)*10*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

// Lapses: the fence above stops the server from serving a former reader
// new records, but it cannot take back records the server served before the
// freeze. A node frozen (SIGSTOP, a GC pause) with records in hand resumes
// with them and with its cached state documents, while the partition's new
// reader may already have applied the same records. Its outputs carry the
// ids of the records that caused them, but the duplicate window drops a
// second copy only for streams and only for its duration (two minutes by
// default): a reply to a plain NATS subject, a copy published after a long
// freeze, or one computed differently by logic that is not deterministic
// (a model's answer) would go out beside the new reader's. The
// compare-and-set protects the state, not the outputs.
//
// So a node publishes outputs and dead letters only under a claim it can
// prove from its own clock: the others declare it dead no sooner than the
// lease TTL after they saw its last heartbeat, which they cannot have seen
// before it was sent. The claim holds until the send time of the last
// heartbeat acknowledged while the claim held, plus the TTL ([claim.renew]).
// Before each publish ([effector.fence]) an effector checks it:
//
//   - within the claim, it publishes;
//   - past it with no new heartbeat yet (NATS slow or out of reach), it
//     waits for one;
//   - when a heartbeat is acknowledged only after the claim ended, the
//     claim has lapsed: others may have taken the node's leases meanwhile,
//     and its own view of the leases may lag. The lapse count moves on and
//     the node reads each lease at the server: a partition whose lease
//     still has the revision it was opened under was read by nobody else
//     and goes on; any other is read again from its ack floor, its
//     effectors' cached documents dropped: their records in hand stay
//     unacknowledged and are applied again on fresh state, here or by the
//     lease's holder. After a heartbeat acknowledged over a new
//     connection, a partition is also read again when it has records
//     outstanding at the server (see [placement.renewed]).
//
// What remains is the time between the check and the publish it guards (a
// freeze of microseconds at that very point); closing it would need the
// outputs written with the state (an outbox in the state document).
type claim struct {
	origin time.Time     // the monotonic clock's zero for until
	ttl    time.Duration // the lease TTL
	// conn counts the times the node's connection went down
	// (bus.Conn.Disconnects); a claim renewed over an earlier connection
	// is in doubt until a heartbeat on the current one is acknowledged: the
	// others may learn at once that a connection is gone (see placement's
	// liveness probe) and take the node's leases before the TTL.
	conn func() uint64
	gen  atomic.Uint64 // conn's reading when the claim was last renewed
	// until is when the claim ends, as nanoseconds since origin; 0 before
	// the first heartbeat.
	until atomic.Int64
	// lapses counts the lapses seen: a partition remembers the count it was
	// opened under (partition.epoch).
	lapses atomic.Uint64
}

// claimState is what a claim says at a moment.
type claimState int

const (
	claimHeld   claimState = iota // within the claim
	claimDoubt                    // past the claim, no new heartbeat yet
	claimLapsed                   // a lapse since the partition was opened: being checked
)

func newClaim(ttl time.Duration, conn func() uint64) *claim {
	return &claim{origin: time.Now(), ttl: ttl, conn: conn}
}

// clock returns the claim clock's reading of now.
func (c *claim) clock() int64 { return int64(time.Since(c.origin)) }

// renew records a heartbeat sent at sent (a [claim.clock] reading), when
// the connection's count of disconnects read gen, and acknowledged by the
// server just now. It reports whether the claim had lapsed: ended before
// the acknowledgement, or renewed last over another connection. A
// heartbeat the server stored after the claim ended proves nothing: the
// others may have declared the node dead before it came (a heartbeat sent
// in time but held up on the way, by a network cut say, no more).
//
// reconnected reports a lapse because the connection changed: records the
// server delivered over the old one may never have arrived. expired
// reports a lapse because the claim ended before the acknowledgement: only
// then may another node have taken a lease meanwhile.
func (c *claim) renew(sent int64, gen uint64) (lapsed, reconnected, expired bool) {
	prev := c.until.Load()
	reconnected = prev != 0 && gen != c.gen.Load()
	expired = prev != 0 && c.clock() >= prev
	lapsed = reconnected || expired
	c.gen.Store(gen)
	if lapsed {
		c.lapses.Add(1)
	}
	if next := sent + int64(c.ttl); next > prev {
		c.until.Store(next) // one writer: the heartbeat (and the first put, before it)
	}
	return lapsed, reconnected, expired
}

// epoch is the lapse count a partition opened now is read under.
func (c *claim) epoch() uint64 { return c.lapses.Load() }

// state is the claim's word on a partition opened under epoch.
func (c *claim) state(epoch uint64) claimState {
	switch {
	case c.lapses.Load() != epoch:
		return claimLapsed
	case c.clock() >= c.until.Load() || c.conn() != c.gen.Load():
		return claimDoubt
	}
	return claimHeld
}

// renewed records a heartbeat sent at sent and acknowledged just now.
// After a lapse it asks the lapse checker (checkLapses, a goroutine of its
// own: nothing on the heartbeat's path may wait on a stream whose leader is
// gone) to check, at the server, the lease of every partition read under an
// older lapse count (when the claim had ended; see checkLapse): one whose
// lease revision is still the one it was
// opened under was read by nobody else meanwhile, and goes on under the new
// count; any other is read again from its ack floor, on fresh state (see
// "Lapses"). Its effectors wait for the outcome before they publish.
//
// After a reconnect a partition whose lease is kept is also read again
// when it has records outstanding at the server (see
// [partition.missedDeliveries]): deliveries and acknowledgements lost with
// the old connection would hold them until the ack wait, 30 s, when no
// later record shows a gap (TestServerRestartUnderLoad). A partition with
// nothing outstanding goes on.
func (p *placement) renewed(sent int64, gen uint64) {
	lapsed, reconnected, expired := p.n.claim.renew(sent, gen)
	if !lapsed {
		return
	}
	p.mu.Lock()
	p.lapse.wanted = true
	p.lapse.reconnected = p.lapse.reconnected || reconnected
	p.lapse.expired = p.lapse.expired || expired
	p.mu.Unlock()
	select {
	case p.checks <- struct{}{}:
	default:
	}
}

// checkLapses runs the checks renewed asks for, one at a time, until ctx
// ends.
func (p *placement) checkLapses(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.checks:
		}
		p.mu.Lock()
		want, reconnected, expired := p.lapse.wanted, p.lapse.reconnected, p.lapse.expired
		p.lapse.wanted, p.lapse.reconnected, p.lapse.expired = false, false, false
		p.mu.Unlock()
		if want {
			p.checkLapse(ctx, reconnected, expired)
		}
	}
}

// checkLapse checks the partitions read under a lapse count older than
// the claim's (see renewed). Each partition's calls to the server are
// bounded by callBound (or the lease TTL, if shorter): one that does not
// answer by then (a stream without a leader, a request lost in an
// election) counts as a lease moved, and the partition is read again from
// its ack floor once the stream answers (see reconcile): reading again is
// always safe, and soon.
//
// When the claim never ended (a reconnect, its last heartbeat acknowledged
// less than a TTL before: expired false), no lease can have moved — the
// others count a node gone only after a full TTL without its heartbeat —
// and the lease bucket is not read: only the deliveries are checked. A
// rolling-restart step's check waited 1 s on a lease bucket whose leader had
// stopped with the server (it answered again 2.6 s later), and counted
// every lease it could not read as moved.
func (p *placement) checkLapse(ctx context.Context, reconnected, expired bool) {
	epoch := p.n.claim.epoch()
	p.readMu.Lock()
	var check []*partition
	for _, part := range p.reading {
		if part.epoch.Load() != epoch {
			check = append(check, part)
		}
	}
	p.readMu.Unlock()
	p.n.metrics.lapses.Inc()
	var moved atomic.Int64
	sem := make(chan struct{}, p.n.opts.ClaimWorkers)
	var wg sync.WaitGroup
	for _, part := range check {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, min(p.ttl, p.callBound()))
			defer cancel()
			was := part.epoch.Load()
			kept := !expired
			if expired {
				var e jetstream.KeyValueEntry
				err := p.resend(cctx, func(ctx context.Context) (err error) {
					e, err = p.kv.Get(ctx, p.n.names.LeaseKey(part.kind.name, part.num))
					return err
				})
				kept = err == nil && e.Revision() == part.lease
			}
			if kept && !(reconnected && part.missedDeliveries(cctx, p.resend)) {
				// A later lapse's check may have moved it on meanwhile:
				// never back.
				part.epoch.CompareAndSwap(was, epoch)
				return
			}
			moved.Add(1)
			part.fail()
		})
	}
	wg.Wait()
	if reconnected {
		p.n.log.Info("reconnected: checked this node's leases and deliveries at the server",
			"partitions", len(check), "read_again", moved.Load())
		return
	}
	p.n.log.Warn("heartbeat acknowledged after the lease TTL ran out: checked this node's leases at the server",
		"ttl", p.ttl, "partitions", len(check), "read_again", moved.Load())
}

// checkEpoch gives up a partition that started reading under a lapse count
// older than the claim's: [placement.renewed] may have missed it.
func (p *placement) checkEpoch(part *partition) {
	if part.epoch.Load() != p.n.claim.epoch() {
		part.fail()
	}
}

// fence returns nil when the effector may publish now under its node's
// claim. While the claim is in doubt (no heartbeat acknowledged in time
// yet) or being checked after a lapse, it waits. When its partition is
// given up meanwhile (its lease moved during a lapse) or the effector is
// being stopped (the partition's lease moved and the node stops reading
// it), its records in hand stay unacknowledged for the partition's next
// reader and fence returns errAbandon at once: a stop must not wait its
// grace for a record that can no longer be published. See "Lapses".
func (e *effector) fence() error {
	wait := time.Millisecond
	for {
		if e.node.claim.state(e.part.epoch.Load()) == claimHeld {
			return nil
		}
		e.mu.Lock()
		stopping := e.stopped
		e.mu.Unlock()
		if stopping {
			return errAbandon
		}
		if e.part.failed() {
			e.halt()
			e.cancel()
			return errAbandon
		}
		if !sleep(e.ctx, wait) {
			return errAbandon
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// missedDeliveries reports whether the partition's consumer, or one of
// its effectors' own consumers, may hold records back until the ack wait
// after a reconnect, or the server cannot say:
//
//   - the server counts deliveries beyond the last that reached the
//     partition: sent over the connection that went down;
//   - the server counts records delivered and not acknowledged. Some may
//     be in hand, but acknowledgements are lost with a connection too (in
//     its socket when a server stopped): in TestServerRestartUnderLoad
//     the server came back with a whole window of 256 unacknowledged
//     records of which every one had been applied and acknowledged, and
//     delivered nothing more for 30 s. Which are in hand is not tracked,
//     so any counts.
//
// A partition with nothing outstanding at the server goes on; reading one
// again for records in hand, or for a delivery on its way over the new
// connection, costs a pause, not a record.
//
// Each call to the server goes through resend (see [placement.resend]).
func (p *partition) missedDeliveries(ctx context.Context, resend func(context.Context, func(context.Context) error) error) bool {
	type reader struct {
		name string
		next func() uint64 // the consumer sequence of the next delivery
	}
	readers := []reader{{p.name, func() uint64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.next
	}}}
	for _, e := range p.loaded() {
		e.mu.Lock()
		ovf := e.ovf
		e.mu.Unlock()
		if ovf != nil {
			readers = append(readers, reader{ovf.name, func() uint64 {
				e.mu.Lock()
				defer e.mu.Unlock()
				return ovf.next
			}})
		}
	}
	for _, r := range readers {
		var cons jetstream.Consumer
		err := resend(ctx, func(ctx context.Context) (err error) {
			cons, err = p.node.streamOf(p.num).Consumer(ctx, r.name)
			return err
		})
		if err != nil {
			return true
		}
		// Read ours after the server's: a delivery that arrives in
		// between is then not taken for a missed one.
		info := cons.CachedInfo()
		if info.NumAckPending > 0 || info.Delivered.Consumer >= r.next() {
			return true
		}
	}
	return false
}
