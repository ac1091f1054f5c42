package actor

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// Placement: which node drives which effector, and when.
//
// Every node announces itself in the placement bucket (key node.<id>, put
// every Heartbeat) and watches the others; a node not heard from for
// HeartbeatTTL is dead. The owner of an effector is the live node hosting its
// kind with the highest rendezvous score hash(node, <kind>/<id>), so every
// node computes the same owner from the same membership, with no coordinator,
// and a node joining or leaving moves only its own share.
//
// An effector is driven (has a consumer and a node pulling from it) only while
// it has work: a marker active.<kind>.<id> in the bucket names the node
// driving it. Markers are the truth; ownership only decides who claims them:
//
//   - A node drives exactly the effectors whose marker names it.
//   - The owner of an effector whose marker names another node (dead, or
//     alive but no longer the owner) claims it with a compare-and-set of the
//     marker, then recreates the consumer to start after the state
//     document's seq. The former driver sees the marker change (or its
//     consumer vanish) and lets go. If two nodes drive one effector for a
//     moment, the state's compare-and-set and seq keep every record applied
//     once.
//   - A driven effector idle for IdleTimeout is passivated: its consumer is
//     deleted and its marker removed; then, if its mailbox got a record
//     meanwhile, it is activated again at once.
//   - A record for a passive effector wakes it: every node reads the headers
//     of all mailbox records of its kinds with an ordered consumer (the wake
//     scan) and activates the effectors it owns that have no marker and have
//     not applied the record. Its scan position (floor.<id>) is saved every
//     heartbeat; when membership changes, every node restarts its scan from
//     the lowest saved position (dead nodes' included), so a record that
//     arrived while ownership moved is looked at again under the new owner.
//
// Records sent to an effector that was never created, or was terminated, go
// to dead letters (reasons no_effector, terminated).

// stallAfter is the least time an effector whose mailbox has records must sit
// idle before its consumer counts as stalled: a one-replica consumer on a
// cluster may lag the stream's leader for a moment.
const stallAfter = 3 * time.Second

// Placement key prefixes in the placement bucket.
const (
	keyNode   = "node."
	keyActive = "active."
	keyFloor  = "floor."
)

type memberDoc struct {
	ID      string    `json:"id"`
	Kinds   []string  `json:"kinds"`
	Started time.Time `json:"started"`
	Beat    time.Time `json:"beat"`
}

type markerDoc struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
}

type floorDoc struct {
	Node string `json:"node"`
	// Pos: every mailbox record at or below it has been looked at.
	Pos uint64 `json:"pos"`
	// From and Members: where the scan last restarted and the live nodes
	// then; a dead node's floor may go once every live node restarted
	// without it from at most its position.
	From    uint64    `json:"from"`
	Members []string  `json:"members"`
	Updated time.Time `json:"updated"`
}

type member struct {
	doc  memberDoc
	seen time.Time
}

type marker struct {
	node string
	rev  uint64
}

// placement is a node's part in placement; see the comment above.
type placement struct {
	n     *Node
	id    string
	kv    jetstream.KeyValue
	kinds []string
	beat  time.Duration
	ttl   time.Duration
	idle  time.Duration

	mu      sync.Mutex
	members map[string]*member
	live    []string            // sorted ids of live nodes
	hosts   map[string][]string // kind → live nodes hosting it
	markers map[records.Ref]marker
	restart chan struct{} // membership changed: restart the scan
	from    uint64        // where the scan last restarted
	liveAt  []string      // live nodes then

	pos atomic.Uint64 // the scan's position

	locks sync.Map // records.Ref → *sync.Mutex: one placement action per effector at a time

	jobs chan records.Ref // effectors to claim
}

func newPlacement(n *Node, bucket jetstream.KeyValue) *placement {
	o := n.opts
	return &placement{
		n: n, id: o.NodeID, kv: bucket, kinds: n.Kinds(),
		beat: o.Heartbeat, ttl: o.HeartbeatTTL, idle: o.IdleTimeout,
		members: map[string]*member{},
		hosts:   map[string][]string{},
		markers: map[records.Ref]marker{},
		restart: make(chan struct{}, 1),
		jobs:    make(chan records.Ref, 4096),
	}
}

// lock serialises placement actions on one effector.
func (p *placement) lock(ref records.Ref) func() {
	m, _ := p.locks.LoadOrStore(ref, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// score is the rendezvous score of node for ref.
func score(node string, ref records.Ref) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(ref.Kind))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(ref.ID))
	x := h.Sum64() // splitmix64 finaliser: FNV alone spreads poorly
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// owner returns the live node that should drive ref, "" when none hosts its
// kind.
func (p *placement) owner(ref records.Ref) string {
	p.mu.Lock()
	hosts := p.hosts[ref.Kind]
	p.mu.Unlock()
	return p.ownerOf(hosts, ref)
}

func (p *placement) ownerOf(hosts []string, ref records.Ref) string {
	if p.n.ownerHook != nil {
		if o, ok := p.n.ownerHook(ref); ok {
			return o
		}
	}
	best, bestScore := "", uint64(0)
	for _, h := range hosts {
		if s := score(h, ref); best == "" || s > bestScore {
			best, bestScore = h, s
		}
	}
	return best
}

// start announces the node, loads membership and markers, claims what it
// owns and starts the background loops, which stop when ctx ends.
func (p *placement) start(ctx context.Context, wg *sync.WaitGroup) error {
	now := time.Now().UTC()
	me := memberDoc{ID: p.id, Kinds: p.kinds, Started: now, Beat: now}
	if err := p.putMember(ctx, me); err != nil {
		return err
	}
	membersReady, markersReady := make(chan error, 1), make(chan error, 1)
	wg.Go(func() { p.watchMembers(ctx, membersReady) })
	wg.Go(func() { p.watchMarkers(ctx, markersReady) })
	for _, ch := range []chan error{membersReady, markersReady} {
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
	for range p.n.opts.ClaimWorkers {
		wg.Go(func() { p.claimer(ctx) })
	}
	p.claimAll()
	wg.Go(func() { p.heartbeat(ctx, me) })
	wg.Go(func() { p.scan(ctx) })
	wg.Go(func() { p.sweep(ctx) })
	return nil
}

// leave removes the node's heartbeat so the others take over at once.
func (p *placement) leave(ctx context.Context) {
	_ = p.kv.Delete(ctx, keyNode+p.id)
}

func (p *placement) putMember(ctx context.Context, m memberDoc) error {
	b, err := codec.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := p.kv.Put(ctx, keyNode+p.id, b); err != nil {
		return fmt.Errorf("announce node %s: %w", p.id, err)
	}
	return nil
}

// heartbeat announces the node, saves its scan position, reviews liveness and
// tidies what dead nodes left, every beat.
func (p *placement) heartbeat(ctx context.Context, me memberDoc) {
	t := time.NewTicker(p.beat)
	defer t.Stop()
	check := time.NewTicker(p.beat / 2)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-check.C:
			p.refresh(now)
		case now := <-t.C:
			me.Beat = now.UTC()
			if err := p.putMember(ctx, me); err != nil && ctx.Err() == nil {
				p.n.log.Warn("heartbeat failed", "err", err)
			}
			p.saveFloor(ctx)
			p.tidy(ctx, now)
			p.reconcile()
		}
	}
}

// watchMembers follows the node.* keys. ready gets nil once the initial
// values are in (or the error that stopped the watch).
func (p *placement) watchMembers(ctx context.Context, ready chan<- error) {
	p.watch(ctx, keyNode+"*", ready, func(e jetstream.KeyValueEntry, initial bool) {
		id := strings.TrimPrefix(e.Key(), keyNode)
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
		p.members[id] = &member{doc: doc, seen: seen}
	})
	p.refresh(time.Now())
}

// watchMarkers follows the active.<kind>.<id> keys and lets go of effectors
// whose marker no longer names this node.
func (p *placement) watchMarkers(ctx context.Context, ready chan<- error) {
	p.watch(ctx, keyActive+">", ready, func(e jetstream.KeyValueEntry, initial bool) {
		ref, ok := refOfKey(strings.TrimPrefix(e.Key(), keyActive))
		if !ok {
			return
		}
		var doc markerDoc
		put := e.Operation() == jetstream.KeyValuePut && codec.Unmarshal(e.Value(), &doc) == nil
		p.mu.Lock()
		cur, had := p.markers[ref]
		if had && cur.rev > e.Revision() {
			p.mu.Unlock() // we already know a newer write (our own)
			return
		}
		if put {
			p.markers[ref] = marker{node: doc.Node, rev: e.Revision()}
		} else {
			delete(p.markers, ref)
		}
		p.mu.Unlock()
		if initial || (put && doc.Node == p.id) {
			return
		}
		if e := p.n.driving(ref); e != nil {
			go p.letGo(ref, e)
		}
		if put && p.owner(ref) == p.id {
			p.enqueue(ref) // taken by a node that is not the owner
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

func refOfKey(key string) (records.Ref, bool) {
	kind, id, ok := strings.Cut(key, ".")
	r := records.Ref{Kind: kind, ID: id}
	return r, ok && r.Validate() == nil
}

// refresh recomputes the live nodes; when they changed it restarts the scan
// and claims the markers this node now owns.
func (p *placement) refresh(now time.Time) {
	p.mu.Lock()
	// While our own heartbeats do not come back on the watch (the watch
	// stalled, say on a server that died, or we are cut off), silence from
	// the others proves nothing: keep them alive until it recovers.
	blind := false
	if me, ok := p.members[p.id]; !ok || now.Sub(me.seen) >= p.ttl {
		blind = true
	}
	var live []string
	hosts := map[string][]string{}
	for id, m := range p.members {
		if id != p.id && now.Sub(m.seen) >= p.ttl && !(blind && slices.Contains(p.live, id)) {
			continue
		}
		live = append(live, id)
		for _, k := range m.doc.Kinds {
			hosts[k] = append(hosts[k], id)
		}
	}
	if !slices.Contains(live, p.id) { // our own key may lag or be gone while stopping
		live = append(live, p.id)
		for _, k := range p.kinds {
			hosts[k] = append(hosts[k], p.id)
		}
	}
	slices.Sort(live)
	changed := !slices.Equal(live, p.live)
	if changed {
		p.n.log.Info("membership changed", "live", live, "was", p.live)
		p.live, p.hosts = live, hosts
	}
	p.mu.Unlock()
	p.n.metrics.nodes.Set(float64(len(live)))
	if changed {
		select {
		case p.restart <- struct{}{}:
		default:
		}
		p.claimAll()
	}
}

// reconcile queues every effector whose marker names this node but which it
// does not drive (an attach failed), and every marker it owns but does not
// hold (a claim failed).
func (p *placement) reconcile() {
	p.mu.Lock()
	var todo []records.Ref
	for ref, m := range p.markers {
		if m.node == p.id && p.n.driving(ref) == nil ||
			m.node != p.id && p.ownerOf(p.hosts[ref.Kind], ref) == p.id {
			todo = append(todo, ref)
		}
	}
	var loose []*effector
	for _, e := range p.n.driven() {
		if m, ok := p.markers[e.ref]; !ok || m.node != p.id {
			loose = append(loose, e)
		}
	}
	p.mu.Unlock()
	for _, ref := range todo {
		p.enqueue(ref)
	}
	for _, e := range loose { // its marker moved while it was being attached
		go p.letGo(e.ref, e)
	}
}

// claimAll queues a claim of every marker this node owns but does not hold.
func (p *placement) claimAll() {
	p.mu.Lock()
	var mine []records.Ref
	for ref, m := range p.markers {
		if m.node != p.id && p.ownerOf(p.hosts[ref.Kind], ref) == p.id {
			mine = append(mine, ref)
		}
	}
	p.mu.Unlock()
	for _, ref := range mine {
		p.enqueue(ref)
	}
}

func (p *placement) enqueue(ref records.Ref) {
	select {
	case p.jobs <- ref:
	default: // full: the next membership review claims it
		go func() { p.jobs <- ref }()
	}
}

// claimer takes over the effectors queued for claiming.
func (p *placement) claimer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ref := <-p.jobs:
			if p.owner(ref) != p.id {
				continue
			}
			if err := p.ensure(ctx, ref, 0); err != nil && ctx.Err() == nil {
				p.n.log.Warn("claim failed; retrying at the next membership review", "effector", ref.String(), "err", err)
			}
		}
	}
}

// ensure makes this node drive ref if it should: ref exists, is not
// terminated, and either has not applied the record at seq or (seq 0) is
// marked active by another node. Records for an effector never created or
// terminated go to dead letters.
func (p *placement) ensure(ctx context.Context, ref records.Ref, seq uint64) error {
	unlock := p.lock(ref)
	defer unlock()
	p.mu.Lock()
	m, marked := p.markers[ref]
	p.mu.Unlock()
	if marked && m.node == p.id && p.n.driving(ref) != nil {
		return nil
	}
	if seq == 0 && !marked {
		return nil // passivated meanwhile
	}
	ent, err := p.n.states.Get(ctx, p.n.names.StateKey(ref))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		if seq > 0 {
			return p.n.deadStray(ctx, ref, seq, reasonNoEffector, fmt.Errorf("effector %s was never created; create it before sending to it", ref))
		}
		return p.unmark(ctx, ref)
	case err != nil:
		return err
	case ent.Value.Status == StatusTerminated:
		if err := p.n.deadTerminated(ctx, ent.Value, ent.Revision); err != nil {
			return err
		}
		return p.unmark(ctx, ref)
	case seq > 0 && ent.Value.applied(seq) && !marked:
		return nil
	}
	if err := p.mark(ctx, ref); err != nil {
		return err
	}
	if marked && m.node != p.id {
		// The former driver's consumer: nobody should pull from it any more.
		if err := p.n.stream.DeleteConsumer(ctx, consumerName(ref, m.node)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			p.n.log.Debug("delete the former driver's consumer", "effector", ref.String(), "err", err)
		}
	}
	if err := p.n.attach(ctx, ent.Value, ent.Revision); err != nil {
		return err
	}
	km := p.n.metrics
	if marked && m.node != p.id {
		km.handovers.WithLabelValues(ref.Kind).Inc()
	} else {
		km.activations.WithLabelValues(ref.Kind).Inc()
	}
	return nil
}

// mark makes ref's marker name this node (compare-and-set).
func (p *placement) mark(ctx context.Context, ref records.Ref) error {
	key := keyActive + p.n.names.StateKey(ref)
	b, err := codec.Marshal(markerDoc{Node: p.id, Since: time.Now().UTC()})
	if err != nil {
		return err
	}
	for range 5 {
		p.mu.Lock()
		m, ok := p.markers[ref]
		p.mu.Unlock()
		if ok && m.node == p.id {
			return nil
		}
		var rev uint64
		if ok {
			rev, err = p.kv.Update(ctx, key, b, m.rev)
		} else {
			rev, err = p.kv.Create(ctx, key, b)
		}
		if err == nil {
			p.mu.Lock()
			if cur := p.markers[ref]; cur.rev < rev {
				p.markers[ref] = marker{node: p.id, rev: rev}
			}
			p.mu.Unlock()
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("mark %s active: %w", ref, err)
		}
		// Someone wrote it meanwhile: read it and try again.
		e, gerr := p.kv.Get(ctx, key)
		p.mu.Lock()
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			delete(p.markers, ref)
		case gerr == nil:
			var doc markerDoc
			_ = codec.Unmarshal(e.Value(), &doc)
			p.markers[ref] = marker{node: doc.Node, rev: e.Revision()}
		}
		p.mu.Unlock()
		if gerr != nil && !errors.Is(gerr, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("mark %s active: %w", ref, gerr)
		}
	}
	return fmt.Errorf("mark %s active: lost the compare-and-set 5 times", ref)
}

// unmark removes ref's marker if it names this node.
func (p *placement) unmark(ctx context.Context, ref records.Ref) error {
	p.mu.Lock()
	m, ok := p.markers[ref]
	p.mu.Unlock()
	if !ok || m.node != p.id {
		return nil
	}
	err := p.kv.Delete(ctx, keyActive+p.n.names.StateKey(ref), jetstream.LastRevision(m.rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) && !isWrongLastSeq(err) {
		return fmt.Errorf("unmark %s: %w", ref, err)
	}
	p.mu.Lock()
	if cur, ok := p.markers[ref]; ok && cur.rev == m.rev {
		delete(p.markers, ref)
	}
	p.mu.Unlock()
	return nil
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// letGo stops driving ref after its marker moved to another node.
func (p *placement) letGo(ref records.Ref, e *effector) {
	unlock := p.lock(ref)
	defer unlock()
	p.mu.Lock()
	m, ok := p.markers[ref]
	p.mu.Unlock()
	if ok && m.node == p.id {
		return // claimed back meanwhile
	}
	p.n.detach(ref, e)
}

// sweep passivates effectors idle for IdleTimeout, and checks once that an
// effector idle for two heartbeats has really nothing to do.
func (p *placement) sweep(ctx context.Context) {
	every := p.beat
	if p.idle > 0 {
		every = min(max(p.idle/4, 10*time.Millisecond), every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, e := range p.n.driven() {
				idle := e.idleSince(now)
				switch {
				case p.idle > 0 && idle >= p.idle:
					p.passivate(ctx, e)
				case idle >= max(2*p.beat, stallAfter) && e.stalled():
					go p.checkStalled(ctx, e)
				}
			}
		}
	}
}

// checkStalled recreates the consumer of an idle effector whose mailbox got a
// record (the wake scan saw it) that its consumer does not deliver: a
// consumer deleted or recreated under it by another node without this node
// being told.
func (p *placement) checkStalled(ctx context.Context, e *effector) {
	if p.n.driving(e.ref) != e || e.idleSince(time.Now()) == 0 || !e.stalled() {
		return
	}
	e.log.Info("consumer delivers nothing while the mailbox holds records; recreating it", "seen", e.seen.Load())
	p.n.consumerGone(e.ref, e)
}

// passivate stops driving an idle effector and deletes its consumer and
// marker; a record that arrived meanwhile activates it again.
func (p *placement) passivate(ctx context.Context, e *effector) {
	ref := e.ref
	unlock := p.lock(ref)
	defer func() { unlock() }() // unlock may be replaced below
	if p.n.driving(ref) != e || e.idleSince(time.Now()) < p.idle {
		return
	}
	p.n.detach(ref, e)
	if err := p.n.stream.DeleteConsumer(ctx, consumerName(ref, p.id)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && ctx.Err() == nil {
		p.n.log.Debug("delete consumer of passivated effector", "effector", ref.String(), "err", err)
	}
	if err := p.unmark(ctx, ref); err != nil {
		p.n.log.Debug("unmark passivated effector", "effector", ref.String(), "err", err)
	}
	p.n.metrics.passivations.WithLabelValues(ref.Kind).Inc()
	e.docMu.Lock()
	doc := e.doc
	e.docMu.Unlock()
	last, err := p.n.lastSeq(ctx, ref)
	if err != nil || (last > doc.Seq && !doc.applied(last)) {
		unlock()
		unlock = func() {}
		if err := p.ensure(ctx, ref, max(last, doc.Seq+1)); err != nil && ctx.Err() == nil {
			p.n.log.Warn("reactivate after passivation", "effector", ref.String(), "err", err)
		}
	}
}

// scan reads the headers of every mailbox record of the hosted kinds and
// wakes the passive effectors this node owns. It restarts from the lowest
// saved scan position whenever membership changes.
func (p *placement) scan(ctx context.Context) {
	for ctx.Err() == nil {
		from, err := p.lowestFloor(ctx)
		if err != nil {
			p.n.log.Warn("wake scan: read positions", "err", err)
			if !sleep(ctx, p.beat) {
				return
			}
			continue
		}
		p.mu.Lock()
		p.from, p.liveAt = from, slices.Clone(p.live)
		p.mu.Unlock()
		p.pos.Store(from - 1)
		p.saveFloor(ctx)
		if err := p.scanFrom(ctx, from); err != nil && ctx.Err() == nil {
			p.n.log.Warn("wake scan stopped; restarting", "err", err)
			sleep(ctx, p.beat/4)
		}
	}
}

// scanFrom scans from stream sequence from until membership changes, ctx
// ends or the scan fails.
func (p *placement) scanFrom(ctx context.Context, from uint64) error {
	var filters []string
	for _, k := range p.kinds {
		filters = append(filters, p.n.names.Prefix()+".mbox."+k+".*")
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, HeadersOnly: true, DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := p.n.conn.JS.OrderedConsumer(ctx, p.n.names.RecordsStream(), cfg)
	if err != nil {
		return fmt.Errorf("wake scan consumer: %w", err)
	}
	// A short heartbeat notices a lost server in seconds, not the default ten.
	it, err := cons.Messages(jetstream.PullMaxMessages(1024), jetstream.PullExpiry(3*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return fmt.Errorf("wake scan: %w", err)
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-p.restart:
		case <-stopped:
		}
		it.Stop()
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		seq := meta.Sequence.Stream
		if ref, ok := p.n.names.RefOf(msg.Subject()); ok {
			if e := p.n.driving(ref); e != nil {
				e.see(seq)
			}
			if p.owner(ref) == p.id {
				p.wake(ctx, ref, seq)
			}
		}
		p.pos.Store(seq)
	}
}

// wake makes sure the record at seq for ref, which this node owns, will be
// applied: ref is driven here, or is woken. It retries until it succeeds or
// ctx ends, so the scan never moves past a record it could not hand over.
func (p *placement) wake(ctx context.Context, ref records.Ref, seq uint64) {
	p.mu.Lock()
	m, marked := p.markers[ref]
	p.mu.Unlock()
	if marked && m.node == p.id && p.n.driving(ref) != nil {
		return
	}
	wait := 20 * time.Millisecond
	for {
		err := p.ensure(ctx, ref, seq)
		if err == nil || ctx.Err() != nil {
			return
		}
		p.n.log.Warn("wake effector; retrying", "effector", ref.String(), "seq", seq, "err", err)
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// lowestFloor returns where a restarted scan must start: after the lowest
// saved position of any node, dead or alive; 1 when none was saved.
func (p *placement) lowestFloor(ctx context.Context) (uint64, error) {
	floors, err := p.floors(ctx)
	if err != nil {
		return 0, err
	}
	lowest := uint64(0)
	first := true
	for _, f := range floors {
		if first || f.doc.Pos < lowest {
			lowest, first = f.doc.Pos, false
		}
	}
	if cur := p.pos.Load(); !first && cur > 0 && cur < lowest {
		lowest = cur
	}
	return lowest + 1, nil
}

type floorEntry struct {
	doc floorDoc
	rev uint64
}

func (p *placement) floors(ctx context.Context) (map[string]floorEntry, error) {
	lister, err := p.kv.ListKeysFiltered(ctx, keyFloor+"*")
	if err != nil {
		return nil, fmt.Errorf("list scan positions: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	out := map[string]floorEntry{}
	for _, k := range keys {
		e, err := p.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read scan position %s: %w", k, err)
		}
		var doc floorDoc
		if codec.Unmarshal(e.Value(), &doc) != nil {
			continue
		}
		out[strings.TrimPrefix(k, keyFloor)] = floorEntry{doc: doc, rev: e.Revision()}
	}
	return out, nil
}

// saveFloor saves the scan position.
func (p *placement) saveFloor(ctx context.Context) {
	p.mu.Lock()
	doc := floorDoc{Node: p.id, Pos: p.pos.Load(), From: p.from, Members: p.liveAt, Updated: time.Now().UTC()}
	p.mu.Unlock()
	if b, err := codec.Marshal(doc); err == nil {
		_, _ = p.kv.Put(ctx, keyFloor+p.id, b)
	}
}

// tidy deletes the heartbeats of nodes dead for long, and the scan positions
// of dead nodes once every live node has restarted its scan from at most
// there without them.
func (p *placement) tidy(ctx context.Context, now time.Time) {
	p.mu.Lock()
	live := slices.Clone(p.live)
	stale := []string{}
	for id, m := range p.members {
		if id != p.id && now.Sub(m.seen) > 10*p.ttl {
			stale = append(stale, id)
		}
	}
	p.mu.Unlock()
	for _, id := range stale {
		_ = p.kv.Delete(ctx, keyNode+id)
	}
	floors, err := p.floors(ctx)
	if err != nil {
		return
	}
	for id, f := range floors {
		if slices.Contains(live, id) {
			continue
		}
		covered := true
		for _, l := range live {
			lf, ok := floors[l]
			if !ok || slices.Contains(lf.doc.Members, id) || lf.doc.From > f.doc.Pos+1 {
				covered = false
				break
			}
		}
		if covered {
			_ = p.kv.Delete(ctx, keyFloor+id, jetstream.LastRevision(f.rev))
		}
	}
}

// lastSeq returns the stream sequence of the last record in ref's mailbox,
// 0 when it has none.
func (n *Node) lastSeq(ctx context.Context, ref records.Ref) (uint64, error) {
	msg, err := n.stream.GetLastMsgForSubject(ctx, n.names.Mailbox(ref))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last record of %s: %w", ref, err)
	}
	return msg.Sequence, nil
}

// driving returns the effector if this node drives ref.
func (n *Node) driving(ref records.Ref) *effector {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.effectors[ref]
}

// deadStray sends the record at seq, addressed to an effector that cannot
// take it, to dead letters.
func (n *Node) deadStray(ctx context.Context, ref records.Ref, seq uint64, reason string, why error) error {
	raw, err := n.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // aged out of the stream
	}
	if err != nil {
		return fmt.Errorf("read record %d: %w", seq, err)
	}
	if raw.Subject != n.names.Mailbox(ref) {
		return nil
	}
	rec := stored{stream: n.names.RecordsStream(), subject: raw.Subject, seq: seq, header: raw.Header, data: raw.Data}
	if err := n.deadLetter(ctx, ref, rec, reason, why); err != nil {
		return fmt.Errorf("dead-letter record %d: %w", seq, err)
	}
	n.metrics.dead.WithLabelValues(ref.Kind, reason).Inc()
	n.log.Warn("record sent to dead letters", "effector", ref.String(), "seq", seq, "reason", reason)
	return nil
}

// deadTerminated sends every record in a terminated effector's mailbox above
// its seq to dead letters, then moves its seq past them.
func (n *Node) deadTerminated(ctx context.Context, doc Document, rev uint64) error {
	ref := doc.Ref()
	last, err := n.lastSeq(ctx, ref)
	if err != nil || last <= doc.Seq {
		return err
	}
	cons, err := n.conn.JS.OrderedConsumer(ctx, n.names.RecordsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{n.names.Mailbox(ref)}, HeadersOnly: true,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: doc.Seq + 1,
	})
	if err != nil {
		return fmt.Errorf("read mailbox of %s: %w", ref, err)
	}
	why := fmt.Errorf("effector %s is terminated", ref)
	for seq := doc.Seq; seq < last; {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return fmt.Errorf("read mailbox of %s: %w", ref, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		seq = meta.Sequence.Stream
		if seq > last {
			break
		}
		if !doc.applied(seq) {
			if err := n.deadStray(ctx, ref, seq, reasonTerminated, why); err != nil {
				return err
			}
		}
	}
	doc.Seq, doc.Ahead, doc.Updated = last, nil, time.Now().UTC()
	if _, err := n.states.Update(ctx, n.names.StateKey(ref), doc, rev); err != nil && !errors.Is(err, kv.ErrConflict) {
		return fmt.Errorf("write state of %s: %w", ref, err)
	}
	return nil
}
