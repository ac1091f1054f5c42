package actor

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/routine"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Placement: which node reads which partition, and when.
//
// Every node announces itself in the placement bucket (key node.<id>, put
// every Heartbeat) and watches the others; a node not heard from for
// HeartbeatTTL is dead. Mailboxes are split into a fixed number of
// partitions per kind (<prefix>.mbox.<partition>.<kind>.*, see
// bus.Names.Partition); the owners of the partitions of kind k are chosen
// among the live nodes hosting k by bounded-load rendezvous hashing (see
// spread.go): every node holds at most ceil(P/N) partitions of a kind, every
// node computes the same owners from the same membership, with no
// coordinator, and a node joining or leaving moves little more than its own
// share. A node whose connection is gone is dead at once, without waiting
// for the TTL (see failover.go).
//
// A lease part.<kind>.<n> in the bucket names the node that reads a
// partition. Leases are the truth; ownership only decides who takes them:
//
//   - A node reads exactly the partitions whose lease names it.
//   - The owner takes a partition whose lease is free or names a dead node
//     (compare-and-set), resets its durable consumer to the ack floor, so
//     what the former reader held but did not acknowledge comes again in
//     order, and reads it. It never takes a lease a live node holds.
//   - A node that reads a partition it no longer owns (a node joined, or came
//     back) stops reading it, lets the records in hand finish, and hands the
//     lease over to the owner (compare-and-set), so the lease has a holder
//     all along; the owner opens it at its next pass. (A stopping node frees
//     its leases instead: the others take them.)
//   - A node that sees its lease taken, freed or rewritten since it opened
//     the partition (it froze, or was cut off, and others moved the lease
//     meanwhile), or a gap in its consumer's sequences (another reader),
//     stops reading at once, and says so (WARN, with the new holder). If
//     the partition is still its own and the lease is free, it takes the
//     lease again and reads from the ack floor, so that every lease has a
//     holder within a beat.
//   - The server fences the former reader off when a lease moves (a
//     pinned-client priority group, unpinned by the new reader; short pull
//     requests): see fence.go.
//
// The cluster's own events are not node failures (DESIGN section 6). While
// the placement bucket cannot be written (its leader died and the servers
// elect another, the server restarts, a rolling upgrade moves its leader),
// nobody can renew a heartbeat and nobody can take a lease either. So a
// node counts a heartbeat's age only in time during which the bucket
// answered: it sees that from its own heartbeats coming back on its watch.
// Silence longer than a normal beat is not counted against the others
// (their last sighting moves forward by it), and after a silence of more
// than quiet (two beats: the bucket did not answer) every node gets a full
// TTL from the moment the bucket answers again; meanwhile (blind) nobody
// is found dead. The heartbeat runs on a path of its own: each write is
// bounded (putTimeout) and tried again at once when it fails, and nothing
// else waits on it (the checks after a lapse run on a goroutine of their
// own, see renewed), so a holder renews within a fraction of a beat of the
// bucket answering. A node's claim is unchanged: past the TTL since its last
// acknowledged heartbeat it stops publishing, and it resumes once a
// heartbeat is acknowledged and its leases are found unchanged.
//
// If two nodes read one partition for a moment all the same, each
// effector's state compare-and-set and seq keep every record applied once.
// Records are dispatched in-process to the effectors they address; an
// effector with nothing to do for IdleTimeout is dropped from memory, and
// its next record loads its state document again.

type memberDoc struct {
	ID      string    `json:"id"`
	Kinds   []string  `json:"kinds"`
	Started time.Time `json:"started"`
	Beat    time.Time `json:"beat"`
	// Probed says the node answers on its liveness subject
	// (bus.Names.NodeAlive), so a "no responders" there means it is gone
	// (see failover.go).
	Probed bool `json:"probed,omitempty"`
	// Spread names the rule by which the node places partitions
	// (spreadBounded); empty for nodes of older versions, which use plain
	// rendezvous hashing.
	Spread string `json:"spread,omitempty"`
}

type leaseDoc struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
}

type member struct {
	doc  memberDoc
	seen time.Time
	gone bool // its connection is gone: dead before its TTL (see failover.go)
	// noResponders is when a probe first found nobody on its liveness
	// subject (zero: not since its last answer).
	noResponders time.Time
}

// slot names a partition of a kind.
type slot struct {
	kind string
	num  int
}

func (s slot) String() string { return s.kind + "/" + strconv.Itoa(s.num) }

type lease struct {
	node string
	rev  uint64
}

// placement is a node's part in placement; see the comment above.
type placement struct {
	n  *Node
	id string
	kv jetstream.KeyValue
	// beats is the same bucket over the node's heartbeat connection,
	// beatConn (see Conn.Side); nil when the node has none. Set before
	// start, read only after.
	beats    jetstream.KeyValue
	beatConn *nats.Conn
	kinds    []string
	beat     time.Duration
	ttl      time.Duration
	idle     time.Duration

	mu      sync.Mutex // guards the fields below
	members map[string]*member
	live    []string            // sorted ids of live nodes
	hosts   map[string][]string // kind → live nodes hosting it
	plain   map[string]bool     // kinds a live node places by plain rendezvous (an older version)
	leases  map[slot]lease
	// retrying holds the partitions whose last action failed, since when
	// (see failing).
	retrying map[slot]time.Time
	// took is how long the server's calls of a partition action took of
	// late: the slowest successful one, decaying by an eighth at each
	// success (see attemptContext). Atomic: actions run in parallel.
	took  atomic.Int64
	blind bool               // our own heartbeats do not come back (see refresh)
	alive *nats.Subscription // the liveness subject (see failover.go)
	// lapse is the check a lapse of the claim asks for (see renewed):
	// wanted, and whether over a new connection; the checker goroutine
	// takes it.
	lapse struct{ wanted, reconnected, expired bool }

	kick   chan struct{} // something changed: reconcile now
	checks chan struct{} // a lapse to check (see renewed)

	loads *stateLoader // state documents read in batches (see failover_load.go)

	// The reconciler owns reading: only it opens and stops partitions.
	readMu  sync.Mutex // guards reading
	reading map[slot]*partition
}

func newPlacement(n *Node, bucket jetstream.KeyValue) *placement {
	o := n.opts
	return &placement{
		n: n, id: o.NodeID, kv: bucket, kinds: n.Kinds(),
		beat: o.Heartbeat, ttl: o.HeartbeatTTL, idle: o.IdleTimeout,
		members:  map[string]*member{},
		hosts:    map[string][]string{},
		plain:    map[string]bool{},
		leases:   map[slot]lease{},
		retrying: map[slot]time.Time{},
		kick:     make(chan struct{}, 1),
		checks:   make(chan struct{}, 1),
		loads:    &stateLoader{n: n},
		reading:  map[slot]*partition{},
	}
}

// score is the rendezvous score of node for partition s.
func score(node string, s slot) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(s.kind))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(strconv.Itoa(s.num)))
	x := h.Sum64() // splitmix64 finaliser: FNV alone spreads poorly
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// owners returns the owner of each partition of kind among hosts, the live
// nodes hosting it: by bounded-load rendezvous (see spread.go), or by plain
// rendezvous while one of them does not know the former (plain).
func (p *placement) owners(kind string, hosts []string, plain bool) []string {
	parts := p.n.names.Partitions()
	var owners []string
	if plain {
		owners = rendezvous(hosts, kind, parts)
	} else {
		owners = spread(hosts, kind, parts)
	}
	if p.n.ownerHook != nil {
		for num := range owners {
			if o, ok := p.n.ownerHook(kind, num); ok {
				owners[num] = o
			}
		}
	}
	return owners
}

// start announces the node, loads membership and leases, and starts the
// background loops on g, which stop when ctx ends. The partitions this node
// owns are opened by the time it returns.
func (p *placement) start(ctx context.Context, g *routine.Group) error {
	now := time.Now().UTC()
	me := memberDoc{ID: p.id, Kinds: p.kinds, Started: now, Beat: now, Spread: spreadBounded, Probed: true}
	if err := p.serveAlive(); err != nil {
		return fmt.Errorf("subscribe to %s: %w", p.n.names.NodeAlive(p.id), err)
	}
	if err := p.announce(ctx, me); err != nil {
		return err
	}
	membersReady, leasesReady := make(chan error, 1), make(chan error, 1)
	g.Go("placement.watch-members", func() { p.watchMembers(ctx, membersReady) })
	g.Go("placement.watch-leases", func() { p.watchLeases(ctx, leasesReady) })
	for _, ch := range []chan error{membersReady, leasesReady} {
		select {
		case err := <-ch:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.refresh(time.Now())
	// Beat while the first pass opens partitions, which may take a while on
	// a cluster: a silent node would look dead to the others.
	g.Go("placement.heartbeat", func() { p.heartbeat(ctx, me) })
	g.Go("placement.lapses", func() { p.checkLapses(ctx) })
	g.Go("placement.review", func() { p.review(ctx) })
	g.Go("placement.detect", func() { p.detect(ctx, g) })
	p.reconcile(ctx)
	g.Go("placement.reconciler", func() { p.reconciler(ctx) })
	g.Go("placement.sweep", func() { p.sweep(ctx) })
	g.Go("placement.leaders", func() { p.spreadLeaders(ctx) })
	return nil
}

// leave stops reading every partition (records in hand finish within the
// shutdown grace), frees their leases and removes the node's heartbeat, so
// the others take over at once.
func (p *placement) leave(ctx context.Context) {
	p.readMu.Lock()
	all := p.reading
	p.reading = map[slot]*partition{}
	p.readMu.Unlock()
	if st := p.n.conn.State(); st != bus.StateConnected {
		// Nothing can be freed either: the others take the leases once the
		// heartbeat's TTL runs out.
		p.n.log.Warn("stopping while NATS is out of reach: records in hand are left for the next reader, the leases to expire", "connection", st)
		for _, part := range all {
			part.stop(0)
		}
		return
	}
	var wg sync.WaitGroup
	for s, part := range all {
		wg.Go(func() {
			part.stop(p.n.opts.ShutdownGrace)
			p.free(ctx, s)
		})
	}
	wg.Wait()
	_ = p.kv.Delete(ctx, p.n.names.NodeKey(p.id))
	p.stopAlive()
}

// announce writes the node's first heartbeat, trying again for up to 10s
// while the bucket does not answer (a cluster just formed, or electing).
func (p *placement) announce(ctx context.Context, me memberDoc) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.putMember(ctx, me)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (p *placement) putMember(ctx context.Context, m memberDoc) error {
	b, err := codec.Marshal(m)
	if err != nil {
		return err
	}
	// A heartbeat says the node can work: none while its own connection is
	// down, whatever the heartbeat connection could do.
	if st := p.n.conn.State(); st != bus.StateConnected {
		return fmt.Errorf("announce node %s: %w (%s)", p.id, errConnDown, st)
	}
	kv := p.kv
	if p.beats != nil && !p.beatConn.IsClosed() {
		kv = p.beats // closed for good: the node's own connection carries them
	}
	sent, gen := p.n.claim.clock(), p.n.conn.Disconnects()
	ctx, cancel := context.WithTimeout(ctx, p.putTimeout())
	defer cancel()
	if _, err := kv.Put(ctx, p.n.names.NodeKey(p.id), b); err != nil {
		return fmt.Errorf("announce node %s: %w", p.id, err)
	}
	p.renewed(sent, gen)
	return nil
}

// errConnDown: the node's own connection to NATS is down, so it sends no
// heartbeat (see putMember).
var errConnDown = errors.New("the node's connection to NATS is down")

// putTimeout bounds one heartbeat write: half a beat, at least 250ms. A
// write the bucket does not answer by then (its leader is gone) is sent
// again at once rather than waiting for a timeout of seconds.
func (p *placement) putTimeout() time.Duration { return max(p.beat/2, 250*time.Millisecond) }

// quiet is how long this node's own heartbeats may go unseen on its watch
// before it counts the placement bucket as not answering (blind): two
// beats, less than the TTL.
func (p *placement) quiet() time.Duration {
	return max(min(2*p.beat, p.ttl-p.beat/4), p.beat+p.beat/8)
}

// review recomputes liveness every half beat, on a goroutine of its own so
// that a slow heartbeat write does not delay noticing a dead node.
func (p *placement) review(ctx context.Context) {
	check := time.NewTicker(p.beat / 2)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-check.C:
			p.refresh(now)
			p.tidy(ctx, now)
		}
	}
}

// heartbeat announces the node every beat. A write that fails is tried
// again after an eighth of a beat, not at the next beat: when the bucket
// answers again (a new leader), the node renews its claim at once. Nothing
// else runs on this goroutine that could wait on a stream without a leader.
func (p *placement) heartbeat(ctx context.Context, me memberDoc) {
	t := time.NewTicker(p.beat)
	defer t.Stop()
	pause := max(p.beat/8, 20*time.Millisecond)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var failing time.Time
		for {
			me.Beat = time.Now().UTC()
			err := p.putMember(ctx, me)
			if err == nil {
				if !failing.IsZero() {
					p.n.log.Info("heartbeat acknowledged again", "after", time.Since(failing).Round(time.Millisecond))
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			if failing.IsZero() {
				failing = time.Now()
				p.n.log.Warn("heartbeat failed; trying again until the placement bucket answers", "err", err)
			} else {
				p.n.log.Debug("heartbeat failed again", "err", err)
			}
			if !sleep(ctx, pause) {
				return
			}
		}
		p.poke()
	}
}

// poke asks the reconciler for a pass.
func (p *placement) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// watchMembers follows the node.* keys. ready gets nil once the initial
// values are in (or the error that stopped the watch).
func (p *placement) watchMembers(ctx context.Context, ready chan<- error) {
	p.watch(ctx, p.n.names.NodeKeys(), ready, func(e jetstream.KeyValueEntry, initial bool) {
		id, ok := p.n.names.NodeOfKey(e.Key())
		if !ok {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if e.Operation() != jetstream.KeyValuePut {
			delete(p.members, id)
			return
		}
		var doc memberDoc
		if codec.Unmarshal(e.Value(), &doc) != nil {
			return
		}
		seen := time.Now()
		if initial && e.Created().Before(seen) {
			seen = e.Created() // an old heartbeat of a node that may be dead
		}
		if prev, ok := p.members[id]; ok && id == p.id && !initial {
			p.answeredAgain(seen, seen.Sub(prev.seen))
		}
		p.members[id] = &member{doc: doc, seen: seen}
	})
	p.refresh(time.Now())
}

// watchLeases follows the part.<kind>.<n> keys.
func (p *placement) watchLeases(ctx context.Context, ready chan<- error) {
	p.watch(ctx, p.n.names.LeaseKeys(), ready, func(e jetstream.KeyValueEntry, initial bool) {
		kind, num, ok := p.n.names.LeaseOfKey(e.Key())
		s := slot{kind: kind, num: num}
		if !ok {
			return
		}
		var doc leaseDoc
		put := e.Operation() == jetstream.KeyValuePut && codec.Unmarshal(e.Value(), &doc) == nil
		p.mu.Lock()
		if cur, had := p.leases[s]; had && cur.rev > e.Revision() {
			p.mu.Unlock() // we already know a newer write (our own)
			return
		}
		if put {
			p.leases[s] = lease{node: doc.Node, rev: e.Revision()}
		} else {
			delete(p.leases, s)
		}
		p.mu.Unlock()
		if !initial {
			p.poke()
		}
	})
}

// watch runs a KV watch on pattern, calling fn for each entry, with initial
// true for the values present when it started.
func (p *placement) watch(ctx context.Context, pattern string, ready chan<- error, fn func(e jetstream.KeyValueEntry, initial bool)) {
	w, err := p.kv.Watch(ctx, pattern)
	if err != nil {
		ready <- fmt.Errorf("watch %s: %w", pattern, err)
		return
	}
	defer func() { _ = w.Stop() }()
	initial := true
	for {
		select {
		case <-ctx.Done():
			if initial {
				ready <- ctx.Err()
			}
			return
		case e, ok := <-w.Updates():
			if !ok {
				if initial {
					ready <- fmt.Errorf("watch %s: closed", pattern)
				}
				return
			}
			if e == nil {
				initial = false
				ready <- nil
				continue
			}
			fn(e, initial)
		}
	}
}

// refresh recomputes the live nodes; when they changed it asks the
// reconciler for a pass.
func (p *placement) refresh(now time.Time) {
	p.mu.Lock()
	// While our own heartbeats do not come back on the watch (the watch
	// stalled, say on a server that died, or we are cut off), silence from
	// the others proves nothing: keep them alive until it recovers.
	//
	// Nobody expires either while our own heartbeat is merely late (a beat
	// and a quarter): the watch may have stalled a moment ago, and another
	// node's heartbeat that came late just before it (its put waited on an
	// election) would make it look gone a TTL after its last one while we
	// are not blind yet. A cluster torture run showed it: a node's watch
	// stalled 1.9 s after a server's restart, another's heartbeat had been
	// 1 s late, and its partitions were taken. A lease counts as expired
	// only after a full TTL during which the bucket answered (DESIGN.md
	// section 6): our own heartbeat coming back is how we know it answers.
	blind, unsure := false, false
	if me, ok := p.members[p.id]; !ok || now.Sub(me.seen) >= p.quiet() {
		blind = true
	} else if now.Sub(me.seen) >= p.beat+p.beat/4 {
		unsure = true
	}
	var live []string
	hosts := map[string][]string{}
	plain := map[string]bool{}
	p.blind = blind
	for id, m := range p.members {
		if id != p.id && (m.gone || now.Sub(m.seen) >= p.ttl) && !((blind || unsure) && slices.Contains(p.live, id)) {
			continue
		}
		live = append(live, id)
		for _, k := range m.doc.Kinds {
			hosts[k] = append(hosts[k], id)
			if m.doc.Spread != spreadBounded {
				plain[k] = true
			}
		}
	}
	if !slices.Contains(live, p.id) { // our own key may lag or be gone while stopping
		live = append(live, p.id)
		for _, k := range p.kinds {
			hosts[k] = append(hosts[k], p.id)
		}
	}
	slices.Sort(live)
	changed := !slices.Equal(live, p.live) || !maps.Equal(plain, p.plain)
	if changed {
		p.n.log.Info("membership changed", "live", live, "was", p.live)
		for _, id := range p.live {
			if slices.Contains(live, id) {
				continue
			}
			how := departureExpired
			if m, ok := p.members[id]; !ok {
				how = departureLeft
			} else if m.gone {
				how = departureClosed
			}
			p.n.metrics.departures.WithLabelValues(how).Inc()
		}
		p.live, p.hosts, p.plain = live, hosts, plain
	}
	p.mu.Unlock()
	p.n.metrics.nodes.Set(float64(len(live)))
	if changed {
		p.poke()
	}
}

// reconciler runs a reconcile pass whenever something changed, and every
// beat. A pass that could not do all it had to (a partition to open whose
// stream or consumer has no leader yet, or answers 10014/10059 right after
// a server restart) is followed by another soon, 50ms later and doubling
// up to a beat, rather than at the next beat: partitions open again as
// soon as their streams answer.
func (p *placement) reconciler(ctx context.Context) {
	const first = 50 * time.Millisecond
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	wait := first
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-retry.C:
		}
		if p.reconcile(ctx) {
			retry.Reset(wait)
			wait = min(2*wait, p.beat)
		} else {
			wait = first
		}
	}
}

// action is what a reconcile pass does about one partition.
type action int

const (
	actOpen   action = iota + 1 // take the lease (if needed) and read it
	actClose                    // stop reading it and free the lease
	actDrop                     // stop reading it: another node took the lease
	actFree                     // free a lease this node holds but does not use
	actReopen                   // stop reading and read again (consumer reset)
	actLost                     // stop reading it: its lease was freed or rewritten under us
)

// reconcile compares what this node reads with what it owns and the leases
// say, and opens and closes partitions accordingly, ClaimWorkers at a time.
// It reports whether something failed that a pass soon may do.
func (p *placement) reconcile(ctx context.Context) (failed bool) {
	p.mu.Lock()
	hosts := maps.Clone(p.hosts)
	plain := maps.Clone(p.plain)
	live := slices.Clone(p.live)
	leases := make(map[slot]lease, len(p.leases))
	for s, l := range p.leases {
		leases[s] = l
	}
	p.mu.Unlock()
	p.readMu.Lock()
	reading := make(map[slot]*partition, len(p.reading))
	for s, part := range p.reading {
		reading[s] = part
	}
	p.readMu.Unlock()

	todo := map[slot]action{}
	owners := map[slot]string{}
	for _, kind := range p.kinds {
		for num, owner := range p.owners(kind, hosts[kind], plain[kind]) {
			s := slot{kind, num}
			owners[s] = owner
			mine := owner == p.id
			l, leased := leases[s]
			part := reading[s]
			switch {
			case part != nil && leased && l.node != p.id:
				todo[s] = actDrop
			case part != nil && (!leased || l.rev != part.lease) && mine:
				// Freed or rewritten since we opened it (we froze, say, and
				// others took it and gave it back): someone else may have
				// read it meanwhile. Read it again under a lease of our own.
				todo[s] = actReopen
			case part != nil && (!leased || l.rev != part.lease):
				todo[s] = actLost
			case part != nil && !mine:
				todo[s] = actClose
			case part != nil && part.failed():
				todo[s] = actReopen
			case part == nil && mine && (!leased || l.node == p.id || !p.heldByLive(l, live)):
				todo[s] = actOpen
			case part == nil && !mine && leased && l.node == p.id:
				todo[s] = actFree
			}
		}
	}
	if len(todo) == 0 {
		return false
	}
	// Stop dispatching what this node must stop reading at once, before the
	// slower work of the pass (records in hand finishing, API calls).
	for s, a := range todo {
		if part := reading[s]; part != nil && a != actOpen && a != actFree {
			p.unread(s, part)
			part.halt()
		}
	}
	// Partitions to open are prepared (lease, unpin, reset) in parallel and
	// started as they become ready: the mailbox stream's consumers are
	// listed once for all those ready at the same time (see
	// partition.start). The other actions run beside them; the pass ends
	// when all are done.
	sem := make(chan struct{}, p.n.opts.ClaimWorkers)
	var others, prepares sync.WaitGroup
	ready := make(chan *opening, len(todo))
	var failures atomic.Bool
	report := func(s slot, err error) {
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, errLeaseHeld): // a hand-over in progress: its reader frees it
			p.n.log.Debug("placement: waiting for the lease", "partition", s.String(), "err", err)
		default:
			failures.Store(true)
			p.failing(s, err)
		}
	}
	for s, a := range todo {
		wg := &others
		if a == actOpen || a == actReopen {
			wg = &prepares
		}
		wg.Go(func() {
			// A lease to take is taken at once, whatever else the pass
			// does: the old reader learns sooner that it lost it.
			var rev uint64
			if a == actOpen {
				if err := p.attempt(ctx, s, func(ctx context.Context) (err error) {
					rev, err = p.take(ctx, s)
					return err
				}); err != nil {
					report(s, err)
					return
				}
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			o, err := p.act(ctx, s, a, reading[s], leases[s], owners[s], rev)
			if o != nil {
				ready <- o
			} else if err == nil {
				p.opened(s)
			}
			report(s, err)
		})
	}
	others.Go(func() { prepares.Wait(); close(ready) })
	for o := range ready {
		batch := []*opening{o}
	more:
		for {
			select {
			case o, ok := <-ready:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		lctx, cancel := context.WithTimeout(ctx, p.callBound())
		names, err := p.n.consumerNames(lctx)
		cancel()
		for _, o := range batch {
			if err != nil {
				o.part.stop(0) // the lease stays ours: the next pass opens it again
				report(o.slot, err)
				continue
			}
			others.Go(func() { report(o.slot, p.startReading(ctx, o, names)) })
		}
	}
	others.Wait()
	return failures.Load()
}

// failing logs that an action on partition s failed and is tried again
// soon: a WARN at the first failure of a run, DEBUG after.
func (p *placement) failing(s slot, err error) {
	p.mu.Lock()
	since, again := p.retrying[s]
	if !again {
		p.retrying[s] = time.Now()
	}
	p.mu.Unlock()
	if again {
		p.n.log.Debug("placement: failed again; trying again soon", "partition", s.String(), "since", time.Since(since).Round(time.Millisecond), "err", err)
		return
	}
	p.n.log.Warn("placement: failed; trying again soon", "partition", s.String(), "err", err)
}

// attemptContext bounds the calls to the server of one attempt at an action
// on partition s: firstAttempt (1s) at first, then a quarter of the time
// since its first failure, from 1s to 10s. Right after a server's restart
// or an election a request can be lost with no answer at all (sent to a
// server as it went, to a stream or consumer whose leader died, or answered
// while the connection was down): JetStream's own 5s API timeout held
// partitions that long after an election in the cluster torture runs, while
// the same request sent again was answered in 30 ms. A retry that is slow
// only because the cluster is slow gets more time as the failures go on.
// Callers take it after waiting for anything else (a claim worker, records
// in hand finishing), so that only the server's time counts.
//
// The bound is never less than four times what the server's calls of a
// successful action took of late (took): a server slow for everyone (a
// loaded machine, a test under the race detector) is not taken for one
// that lost a request, and gets the time it needs from the first attempt.
func (p *placement) attemptContext(ctx context.Context, s slot) (context.Context, context.CancelFunc) {
	p.mu.Lock()
	since, again := p.retrying[s]
	p.mu.Unlock()
	if !again {
		return context.WithTimeout(ctx, p.callBound())
	}
	return context.WithTimeout(ctx, min(max(time.Since(since)/4, p.callBound()), 10*time.Second))
}

// callBound is the least time a call to the server that a partition waits
// on is given now: firstAttempt, or four times what the calls of a
// successful action took of late if that is more, at most 10s (see
// attemptContext).
func (p *placement) callBound() time.Duration {
	return min(max(firstAttempt, 4*time.Duration(p.took.Load())), 10*time.Second)
}

// attempt runs f, one attempt at an action on partition s, under
// attemptContext, and notes how long its calls took when it succeeds.
func (p *placement) attempt(ctx context.Context, s slot, f func(context.Context) error) error {
	actx, cancel := p.attemptContext(ctx, s)
	defer cancel()
	began := time.Now()
	if err := f(actx); err != nil {
		return err
	}
	p.tookFor(time.Since(began))
	return nil
}

// tookFor notes that a successful action's calls to the server took d (see
// took).
func (p *placement) tookFor(d time.Duration) {
	for {
		old := p.took.Load()
		next := max(int64(d), old-old/8)
		if p.took.CompareAndSwap(old, next) {
			return
		}
	}
}

// resend runs f, one read from the server that changes nothing, under ctx,
// and sends it again whenever a try goes unanswered for tryBound, until ctx
// ends: a request lost with a leader that moved (a consumer's leader on a
// server that stopped) is sent again to the new one within a fraction of a
// second, instead of holding its caller for the whole of ctx's bound (the
// post-reconnect check of a rolling-restart step in the cluster torture
// runs took 1.2 s of which 1 s was one unanswered request).
func (p *placement) resend(ctx context.Context, f func(context.Context) error) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, p.tryBound())
		err := f(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

// tryBound is how long resend waits for one answer: retryRead (250ms), or
// twice what the calls of a successful action took of late if that is
// more (a server slow for everyone is not sent each request several
// times), at most callBound.
func (p *placement) tryBound() time.Duration {
	return min(max(retryRead, 2*time.Duration(p.took.Load())), p.callBound())
}

// retryRead is the least time resend waits for an answer before it sends
// the request again: a read answers in milliseconds when what it needs has
// a leader.
const retryRead = 250 * time.Millisecond

// firstAttempt bounds the first attempt of a call to the server that a
// partition waits on (see attemptContext); an answer takes milliseconds
// when the stream or consumer it needs has a leader.
const firstAttempt = time.Second

// opened ends a run of failures of partition s, if any: what had to be
// done about it is done.
func (p *placement) opened(s slot) {
	p.mu.Lock()
	since, ok := p.retrying[s]
	delete(p.retrying, s)
	p.mu.Unlock()
	if ok {
		p.n.log.Info("placement: done after failures", "partition", s.String(), "after", time.Since(since).Round(time.Millisecond))
	}
}

// opening is a partition prepared for reading (see act), not started yet.
type opening struct {
	slot slot
	part *partition
	cons jetstream.Consumer
	from string // the node whose lease this node took, if another
}

// startReading starts reading a prepared partition; names are the mailbox stream's
// consumers, listed after its reset.
func (p *placement) startReading(ctx context.Context, o *opening, names []string) error {
	if err := p.attempt(ctx, o.slot, func(ctx context.Context) error { return o.part.start(ctx, o.cons, names) }); err != nil {
		return fmt.Errorf("open partition %s: %w", o.slot, err)
	}
	p.readMu.Lock()
	p.reading[o.slot] = o.part
	p.readMu.Unlock()
	p.opened(o.slot)
	p.checkEpoch(o.part)
	if o.from != "" {
		p.n.metrics.handovers.WithLabelValues(o.slot.kind).Inc()
		p.n.log.Info("took over partition", "partition", o.slot.String(), "from", o.from)
	}
	return nil
}

// act carries out one reconcile action on partition s, whose lease is l
// and whose owner is owner by this node's view; part (if it reads s) is
// already halted. To open a partition it prepares it (under the lease
// revision rev, which the caller took; to reopen one it takes the lease
// itself), and the caller then starts it.
func (p *placement) act(ctx context.Context, s slot, a action, part *partition, l lease, owner string, rev uint64) (*opening, error) {
	switch a {
	case actDrop, actLost:
		holder := l.node
		if a == actLost {
			holder = "none (freed)"
			if l.node != "" {
				holder = l.node + " (rewritten)"
			}
		}
		p.n.log.Warn("lost the lease of a partition: stopped reading it", "partition", s.String(), "holder", holder, "lease_rev", l.rev, "read_under", part.lease)
		p.stopFenced(ctx, part)
		return nil, nil
	case actClose, actFree:
		if a == actClose {
			part.stop(p.n.opts.ShutdownGrace)
		}
		return nil, p.attempt(ctx, s, func(ctx context.Context) error { return p.handOver(ctx, s, owner) })
	case actReopen:
		if l.rev != part.lease {
			p.n.log.Warn("the lease of a partition changed while it was read: reading it again under a lease of its own", "partition", s.String(), "holder", l.node, "lease_rev", l.rev, "read_under", part.lease)
		}
		part.stop(p.n.opts.ShutdownGrace)
	}
	o := &opening{slot: s}
	if l.node != "" && l.node != p.id {
		o.from = l.node
	}
	err := p.attempt(ctx, s, func(ctx context.Context) (err error) {
		if a == actReopen {
			if rev, err = p.take(ctx, s); err != nil {
				return err
			}
		}
		if o.part, o.cons, err = p.n.preparePartition(ctx, p.n.kindSpec(s.kind), s.num, rev); err != nil {
			return fmt.Errorf("open partition %s: %w", s, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if o.from == "" {
		// Freed, or read by this node before (halted by now): no former
		// reader can still drop records (drop.go, "Drops").
		o.part.opened = time.Time{}
	}
	return o, nil
}

func (p *placement) unread(s slot, part *partition) {
	p.readMu.Lock()
	if p.reading[s] == part {
		delete(p.reading, s)
	}
	p.readMu.Unlock()
}

// reopen asks for partition part to be read again from its ack floor.
func (p *placement) reopen(part *partition) { p.poke() }

// stopFenced stops reading part, whose lease moved, and unpins its
// consumers: a pull request of ours the server pinned after the new reader's
// unpin must not hold the partition until the pin expires (see fence.go).
func (p *placement) stopFenced(ctx context.Context, part *partition) {
	owns := part.ownConsumers()
	part.stop(p.n.opts.ShutdownGrace)
	ctx, cancel := context.WithTimeout(ctx, p.callBound()) // the new reader unpins too
	defer cancel()
	for _, name := range append(owns, part.name) {
		if err := p.n.unpin(ctx, part.num, name); err != nil && ctx.Err() == nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			p.n.log.Debug("placement: unpin on the way out", "consumer", name, "err", err)
		}
	}
}

// take makes the lease of s name this node (compare-and-set) and returns
// its revision.
func (p *placement) take(ctx context.Context, s slot) (uint64, error) {
	b, err := codec.Marshal(leaseDoc{Node: p.id, Since: time.Now().UTC()})
	if err != nil {
		return 0, err
	}
	for range 5 {
		p.mu.Lock()
		l, ok := p.leases[s]
		p.mu.Unlock()
		if ok && l.node == p.id {
			return l.rev, nil
		}
		if ok && p.heldByLive(l, p.liveNodes()) {
			return 0, fmt.Errorf("%w: lease of %s is held by live node %s", errLeaseHeld, s, l.node)
		}
		var rev uint64
		if ok {
			rev, err = p.kv.Update(ctx, p.n.names.LeaseKey(s.kind, s.num), b, l.rev)
		} else {
			rev, err = p.kv.Create(ctx, p.n.names.LeaseKey(s.kind, s.num), b)
		}
		if err == nil {
			p.mu.Lock()
			if cur := p.leases[s]; cur.rev < rev {
				p.leases[s] = lease{node: p.id, rev: rev}
			}
			p.mu.Unlock()
			return rev, nil
		}
		if !kv.IsConflict(err) {
			return 0, fmt.Errorf("take lease of %s: %w", s, err)
		}
		// Someone wrote it meanwhile: read it and try again.
		e, gerr := p.kv.Get(ctx, p.n.names.LeaseKey(s.kind, s.num))
		p.mu.Lock()
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			delete(p.leases, s)
		case gerr == nil:
			var doc leaseDoc
			_ = codec.Unmarshal(e.Value(), &doc)
			p.leases[s] = lease{node: doc.Node, rev: e.Revision()}
		}
		p.mu.Unlock()
		if gerr != nil && !errors.Is(gerr, jetstream.ErrKeyNotFound) {
			return 0, fmt.Errorf("take lease of %s: %w", s, gerr)
		}
	}
	return 0, fmt.Errorf("take lease of %s: lost the compare-and-set 5 times", s)
}

// handOver makes the lease of s, which names this node and which it no
// longer reads, name owner instead (compare-and-set), so that the lease has
// a holder all along and the owner opens it at its next pass; with no owner
// it frees the lease. An owner that does not think the partition its own
// frees it in turn.
func (p *placement) handOver(ctx context.Context, s slot, owner string) error {
	if owner == "" || owner == p.id {
		return p.free(ctx, s)
	}
	p.mu.Lock()
	l, ok := p.leases[s]
	p.mu.Unlock()
	if !ok || l.node != p.id {
		return nil
	}
	b, err := codec.Marshal(leaseDoc{Node: owner, Since: time.Now().UTC()})
	if err != nil {
		return err
	}
	rev, err := p.kv.Update(ctx, p.n.names.LeaseKey(s.kind, s.num), b, l.rev)
	if kv.IsConflict(err) {
		return nil // someone else wrote it meanwhile
	}
	if err != nil {
		return fmt.Errorf("hand the lease of %s over to %s: %w", s, owner, err)
	}
	p.mu.Lock()
	if cur := p.leases[s]; cur.rev < rev {
		p.leases[s] = lease{node: owner, rev: rev}
	}
	p.mu.Unlock()
	return nil
}

// free deletes the lease of s if it names this node.
func (p *placement) free(ctx context.Context, s slot) error {
	p.mu.Lock()
	l, ok := p.leases[s]
	p.mu.Unlock()
	if !ok || l.node != p.id {
		return nil
	}
	err := p.kv.Delete(ctx, p.n.names.LeaseKey(s.kind, s.num), jetstream.LastRevision(l.rev))
	if err != nil && !kv.IsConflict(err) {
		return fmt.Errorf("free lease of %s: %w", s, err)
	}
	p.mu.Lock()
	if cur, ok := p.leases[s]; ok && cur.rev == l.rev {
		delete(p.leases, s)
	}
	p.mu.Unlock()
	return nil
}

// heldByLive reports whether lease l names a live node other than this one.
func (p *placement) heldByLive(l lease, live []string) bool {
	if p.n.stealHook != nil && p.n.stealHook() {
		return false
	}
	return l.node != p.id && slices.Contains(live, l.node)
}

func (p *placement) liveNodes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.live)
}

// errLeaseHeld: the partition's lease names another live node; the owner
// waits for that node to free it.
var errLeaseHeld = errors.New("lease held")

// sweep passivates the effectors idle for IdleTimeout.
func (p *placement) sweep(ctx context.Context) {
	if p.idle <= 0 {
		return
	}
	t := time.NewTicker(min(max(p.idle/4, 10*time.Millisecond), p.beat))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, part := range p.n.partitions() {
				part.passivate(now, p.idle)
			}
		}
	}
}

// tidy deletes the heartbeats of nodes dead for long, each write bounded
// by putTimeout; nothing while this node is blind.
func (p *placement) tidy(ctx context.Context, now time.Time) {
	p.mu.Lock()
	stale := []string{}
	for id, m := range p.members {
		if id != p.id && !p.blind && now.Sub(m.seen) > 10*p.ttl {
			stale = append(stale, id)
		}
	}
	p.mu.Unlock()
	for _, id := range stale {
		dctx, cancel := context.WithTimeout(ctx, p.putTimeout())
		_ = p.kv.Delete(dctx, p.n.names.NodeKey(id))
		cancel()
	}
}

// answeredAgain is called, under mu, when this node's own heartbeat comes
// back on its watch at seen, gap after the one before. Time beyond a beat
// in which its own heartbeats did not come back is time the placement
// bucket did not answer (or this node could not hear it): it does not count
// against the others' heartbeats, which may have failed just as its own
// did. After a gap longer than quiet every other node gets a full TTL from
// now to renew (DESIGN section 6: a lease counts as expired only after a
// full TTL during which the bucket answered); after a shorter one their
// last sightings move forward by the excess.
func (p *placement) answeredAgain(seen time.Time, gap time.Duration) {
	excess := gap - p.beat
	if excess <= 0 {
		return
	}
	outage := gap > p.quiet()
	for id, m := range p.members {
		if id == p.id {
			continue
		}
		if outage {
			m.seen = later(m.seen, seen)
		} else {
			m.seen = earlier(m.seen.Add(excess), later(m.seen, seen))
		}
		m.noResponders = time.Time{}
	}
	if outage {
		p.n.metrics.bucketOutages.Inc()
		p.n.log.Info("the placement bucket answers again: every node gets a full lease TTL to renew before any counts as gone",
			"silent_for", gap.Round(time.Millisecond), "ttl", p.ttl)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
