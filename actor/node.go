package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a [Node]. The zero value is valid.
type Options struct {
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the node's Prometheus metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// ShutdownGrace is how long a stopping node lets records in hand finish
	// before cancelling their logic. Default 10s.
	ShutdownGrace time.Duration

	// NodeID names the node in placement. Default: random, new at every
	// start (a restarted node is a new member).
	NodeID string
	// Heartbeat is how often the node announces itself. Default 1s.
	Heartbeat time.Duration
	// HeartbeatTTL is how long a node not heard from counts as alive; then
	// the others take over its effectors. Default 3s; must exceed Heartbeat.
	HeartbeatTTL time.Duration
	// IdleTimeout is how long an effector with nothing to do keeps its
	// consumer before it is passivated; the next record activates it again.
	// Default 2m; negative: never passivate.
	IdleTimeout time.Duration
	// ClaimWorkers is how many effectors the node takes over in parallel
	// when membership changes. Default 4.
	ClaimWorkers int
	// ReplySubjects are the subjects besides mailboxes that records may be
	// sent and replied to (EA-Reply), as NATS subject patterns. Nil means
	// bus.DefaultReplySubjects (_INBOX.>, NATS request inboxes); an empty
	// non-nil slice allows none. $-prefixed subjects and subjects under the
	// prefix other than mailboxes and the sender's own outbox are always
	// refused; a pattern that can only match those is an error. See
	// [bus.Routes].
	ReplySubjects []string
}

// withDefaults validates o and fills in defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for name, d := range map[string]time.Duration{"ShutdownGrace": o.ShutdownGrace, "Heartbeat": o.Heartbeat, "HeartbeatTTL": o.HeartbeatTTL} {
		if d < 0 {
			return o, invalidf("NewNode: %s %s must not be negative", name, d)
		}
	}
	o.ShutdownGrace = orDefault(o.ShutdownGrace, 10*time.Second)
	o.Heartbeat = orDefault(o.Heartbeat, time.Second)
	o.HeartbeatTTL = orDefault(o.HeartbeatTTL, 3*o.Heartbeat)
	o.IdleTimeout = orDefault(o.IdleTimeout, 2*time.Minute)
	o.ClaimWorkers = orDefault(o.ClaimWorkers, 4)
	if o.HeartbeatTTL <= o.Heartbeat {
		return o, invalidf("NewNode: HeartbeatTTL %s must exceed Heartbeat %s (use about 3 beats)", o.HeartbeatTTL, o.Heartbeat)
	}
	if o.ClaimWorkers < 1 {
		return o, invalidf("NewNode: ClaimWorkers %d must be positive", o.ClaimWorkers)
	}
	if o.NodeID == "" {
		o.NodeID = strings.ToLower(records.NewID()[16:])
	} else if err := records.ValidateID(o.NodeID); err != nil {
		return o, invalidf("NewNode: NodeID: %v", err)
	}
	return o, nil
}

// Node hosts kinds and drives their effectors: it serves the control
// endpoints for its kinds and consumes every live effector of those kinds.
type Node struct {
	conn    *bus.Conn
	names   bus.Names
	log     *slog.Logger
	opts    Options
	metrics *metrics

	mu        sync.Mutex
	kinds     map[string]*kindSpec
	effectors map[records.Ref]*effector
	running   bool
	ready     atomic.Bool

	// crash, when set (by tests only), is asked at each step of processing
	// whether the node dies there; see crashPoint.
	crash func(point crashPoint, ref records.Ref, seq uint64) bool
	// ownerHook, when set (by tests only), overrides placement's choice of
	// owner where it returns true.
	ownerHook func(ref records.Ref) (string, bool)

	// routes decides where records may be sent (Options.ReplySubjects).
	routes bus.Routes

	// Set by Run.
	states *states
	stream jetstream.Stream
	runCtx context.Context
	place  *placement
}

// ID returns the node's id in placement.
func (n *Node) ID() string { return n.opts.NodeID }

// NewNode returns a node on conn. Host kinds on it, then Run it.
func NewNode(conn *bus.Conn, opts Options) (*Node, error) {
	if conn == nil {
		return nil, invalidf("NewNode: conn is nil")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{
		conn:      conn,
		names:     conn.Names(),
		log:       opts.Logger,
		opts:      opts,
		kinds:     map[string]*kindSpec{},
		effectors: map[records.Ref]*effector{},
	}
	if n.routes, err = newRoutes(n.names, opts.ReplySubjects); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, n)
	if err != nil {
		return nil, err
	}
	n.metrics = m
	return n, nil
}

// Host adds kinds to the node. It must be called before Run. A kind hosted
// twice or defined badly is an error naming it.
func (n *Node) Host(defs ...Definition) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		return ErrRunning
	}
	for _, d := range defs {
		if d == nil {
			return invalidf("Host: nil definition")
		}
		s, err := d.spec()
		if err != nil {
			return err
		}
		if _, dup := n.kinds[s.name]; dup {
			return fmt.Errorf("%w: %s", ErrDuplicateKind, s.name)
		}
		n.kinds[s.name] = s
	}
	return nil
}

// Kinds returns the names of the kinds hosted.
func (n *Node) Kinds() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.kinds))
	for k := range n.kinds {
		out = append(out, k)
	}
	return out
}

// Ready reports whether the node serves its kinds: streams and buckets are in
// place, its effectors are attached and its control endpoints answer.
func (n *Node) Ready() bool { return n.ready.Load() && n.conn.Connected() }

// Run drives the node until ctx ends, then shuts down gracefully: it stops
// taking records, lets records in hand finish (up to ShutdownGrace) and
// releases the ones it holds for redelivery. It returns nil after a clean
// shutdown. Provision the connection before Run.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	if n.running {
		n.mu.Unlock()
		return ErrRunning
	}
	if len(n.kinds) == 0 {
		n.mu.Unlock()
		return invalidf("Run: the node hosts no kind; call Host first")
	}
	n.running = true
	n.mu.Unlock()

	bucket, err := n.conn.StateBucket(ctx)
	if err != nil {
		return err
	}
	n.states = newStates(bucket, n.names)
	if n.stream, err = n.conn.Stream(ctx); err != nil {
		return err
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	n.runCtx = runCtx

	placeBucket, err := n.conn.JS.KeyValue(ctx, n.names.PlaceBucket())
	if err != nil {
		return fmt.Errorf("bucket %s: %w (was it provisioned?)", n.names.PlaceBucket(), err)
	}
	n.place = newPlacement(n, placeBucket)
	placeCtx, stopPlace := context.WithCancel(runCtx)
	var placeLoops sync.WaitGroup
	stopPlacement := func() {
		stopPlace()
		placeLoops.Wait()
		leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		n.place.leave(leaveCtx)
		cancel()
	}
	if err := n.place.start(placeCtx, &placeLoops); err != nil {
		stopPlacement()
		n.stopAll()
		return err
	}
	ctl, err := n.serveControl()
	if err != nil {
		stopPlacement()
		n.stopAll()
		return err
	}
	// The server must have the control subscriptions before the node says it
	// is ready, or a client acting on /readyz could find no responder.
	flushCtx, cancelFlush := context.WithTimeout(ctx, 10*time.Second)
	err = n.conn.NC.FlushWithContext(flushCtx)
	cancelFlush()
	if err != nil {
		ctl.stop()
		stopPlacement()
		n.stopAll()
		return fmt.Errorf("register control endpoints: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(runCtx)
	watched := make(chan struct{})
	go func() { defer close(watched); n.watch(watchCtx) }()
	n.ready.Store(true)
	n.log.Info("node ready", "node", n.opts.NodeID, "kinds", n.Kinds(), "effectors", n.count())

	<-ctx.Done()
	n.ready.Store(false)
	n.log.Info("node stopping", "grace", n.opts.ShutdownGrace)
	ctl.stop()
	stopPlacement()
	n.stopAll()
	stopWatch()
	<-watched
	n.log.Info("node stopped")
	return nil
}

func (n *Node) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.effectors)
}

// attach starts driving the effector of doc. Its consumer is created afresh
// to start right after the document's Seq (a consumer left by another node is
// deleted first, which also stops that node pulling from it), so nothing is
// applied out of order. Consumers are cheap: memory storage, one replica; the
// state document's Seq is the true cursor.
func (n *Node) attach(ctx context.Context, doc Document, rev uint64) error {
	ref := doc.Ref()
	n.mu.Lock()
	k := n.kinds[ref.Kind]
	_, have := n.effectors[ref]
	n.mu.Unlock()
	if k == nil || have {
		return nil
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       consumerName(ref, n.opts.NodeID),
		Description:   "mailbox of " + ref.String(),
		FilterSubject: n.names.Mailbox(ref),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       k.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: k.prefetch,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MemoryStorage: true,
		Replicas:      1,
		// A safety net: a consumer nobody pulls from goes after an hour.
		InactiveThreshold: time.Hour,
	}
	if doc.Seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, doc.Seq+1
	}
	cons, err := n.stream.CreateConsumer(ctx, cfg)
	if err == nil && cons.CachedInfo().Delivered.Consumer > 0 {
		// An identical consumer another driver created and pulls from.
		err = jetstream.ErrConsumerExists
	}
	for try := 0; errors.Is(err, jetstream.ErrConsumerExists) && try < 5; try++ {
		// Left by a node that drove it before (perhaps still pulling).
		if err = n.stream.DeleteConsumer(ctx, cfg.Durable); err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = n.stream.CreateConsumer(ctx, cfg)
			if err == nil && cons.CachedInfo().Delivered.Consumer > 0 {
				err = jetstream.ErrConsumerExists
			}
		}
	}
	if err != nil {
		return fmt.Errorf("consumer for %s: %w", ref, err)
	}
	ectx, cancel := context.WithCancel(n.runCtx)
	e := &effector{
		node: n, kind: k, ref: ref, km: n.metrics.forKind(ref.Kind),
		key: n.names.StateKey(ref),
		log: n.log.With("effector", ref.String()),
		ctx: ectx, cancel: cancel,
		doc: doc, rev: rev,
		lastActive:   time.Now(),
		nextDelivery: 1, // see effector.exclusive
	}
	n.mu.Lock()
	if _, have := n.effectors[ref]; have {
		n.mu.Unlock()
		cancel()
		return nil
	}
	n.effectors[ref] = e
	n.mu.Unlock()
	cc, err := cons.Consume(e.deliver,
		jetstream.PullMaxMessages(k.prefetch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				e.log.Info("consumer gone; detaching", "err", err)
				go n.consumerGone(ref, e)
				return
			}
			e.log.Debug("consume", "err", err)
			if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoHeartbeat) {
				// After a server restart a memory consumer is gone and pulls
				// find no responder: check, and attach again if so.
				if e.checking.CompareAndSwap(false, true) {
					go n.checkConsumer(ref, e)
				}
			}
		}))
	if err != nil {
		n.mu.Lock()
		delete(n.effectors, ref)
		n.mu.Unlock()
		cancel()
		return fmt.Errorf("consume mailbox of %s: %w", ref, err)
	}
	e.mu.Lock()
	e.cons = cc
	e.mu.Unlock()
	n.metrics.active.WithLabelValues(ref.Kind).Inc()
	return nil
}

// checkConsumer looks up e's consumer and calls consumerGone if the server no
// longer has it.
func (n *Node) checkConsumer(ref records.Ref, e *effector) {
	defer e.checking.Store(false)
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, err := n.stream.Consumer(ctx, consumerName(ref, n.opts.NodeID))
		switch {
		case err == nil:
			return
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			e.log.Info("consumer gone from the server; attaching again")
			n.consumerGone(ref, e)
			return
		}
		sleep(ctx, 250*time.Millisecond) // JetStream may still be starting
	}
}

// consumerGone lets go of an effector whose consumer vanished: another node
// took it over, or the server lost it (memory consumers do not survive a
// server restart). If its marker still names this node, it is attached again.
func (n *Node) consumerGone(ref records.Ref, e *effector) {
	p := n.place
	unlock := p.lock(ref)
	n.detach(ref, e)
	unlock()
	p.mu.Lock()
	m, ok := p.markers[ref]
	p.mu.Unlock()
	if ok && m.node == p.id && n.runCtx.Err() == nil {
		p.enqueue(ref)
	}
}

// detach stops driving ref if e still drives it.
func (n *Node) detach(ref records.Ref, e *effector) {
	n.mu.Lock()
	if n.effectors[ref] != e {
		n.mu.Unlock()
		return
	}
	delete(n.effectors, ref)
	n.mu.Unlock()
	e.stop(n.opts.ShutdownGrace)
	n.metrics.active.WithLabelValues(ref.Kind).Dec()
}

// stopAll stops every effector in parallel, each with the shutdown grace.
func (n *Node) stopAll() {
	n.mu.Lock()
	all := n.effectors
	n.effectors = map[records.Ref]*effector{}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for ref, e := range all {
		wg.Go(func() {
			e.stop(n.opts.ShutdownGrace)
			n.metrics.active.WithLabelValues(ref.Kind).Dec()
		})
	}
	wg.Wait()
}

// watch runs the slow-logic watchdog over every effector until ctx ends.
func (n *Node) watch(ctx context.Context) {
	t := time.NewTicker(slowLogic / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, e := range n.driven() {
				e.checkSlow(now)
			}
		}
	}
}

// backlog sums, per kind, the records waiting for this node's effectors.
func (n *Node) backlog() map[string]int {
	out := make(map[string]int)
	for _, k := range n.Kinds() {
		out[k] = 0
	}
	for _, e := range n.driven() {
		out[e.ref.Kind] += e.backlog()
	}
	return out
}

// driven returns the effectors the node drives right now.
func (n *Node) driven() []*effector {
	n.mu.Lock()
	defer n.mu.Unlock()
	all := make([]*effector, 0, len(n.effectors))
	for _, e := range n.effectors {
		all = append(all, e)
	}
	return all
}

// crashPoint names a step of processing at which a test can make the node die.
type crashPoint int

const (
	afterOutputs crashPoint = iota + 1 // outputs published, state not written
	afterState                         // state written, record not acknowledged
)
