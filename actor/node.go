package actor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/routine"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
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
	// IdleTimeout is how long an effector with nothing to do stays loaded
	// (its state document cached in memory) before it is passivated; its
	// next record loads it again. Default 2m; negative: never passivate.
	IdleTimeout time.Duration
	// ClaimWorkers is how many partitions the node opens or closes in
	// parallel when membership changes (each takes a few JetStream API
	// calls). Default 16.
	ClaimWorkers int
	// ReplySubjects are the subjects besides mailboxes that records may be
	// sent and replied to (EA-Reply), as NATS subject patterns. Nil means
	// bus.DefaultReplySubjects (_INBOX.>, NATS request inboxes); an empty
	// non-nil slice allows none. $-prefixed subjects and subjects under the
	// prefix other than mailboxes and the sender's own outbox are always
	// refused; a pattern that can only match those is an error. See
	// [bus.Routes].
	ReplySubjects []string
	// StallAfter is how long an effector may hold records without finishing
	// one before it counts as stalled: the gauge ea_effectors_stalled counts
	// it and a warning names it, its partition and the partition
	// consumer's state. Default 10s.
	StallAfter time.Duration
	// SpreadLeaders is how often the live node with the lowest id checks
	// that the leaders of the deployment's replicated streams are spread
	// over the cluster's servers (bus.Conn.SpreadLeader: mailbox, outbox
	// and state streams of each group, the lease bucket, the timer stream)
	// and, when they are not and no server is away, moves one leader
	// (a preferred step-down); after a move it checks again 3s later. A
	// server's restart or a leader's election leaves the leaders where the
	// elections put them, often on one server; this brings the spread back
	// without any node restarting. Default 15s; negative: never.
	SpreadLeaders time.Duration
	// Intercept, when set, runs around every attempt of the logic of every
	// kind the node hosts, for behaviour that cuts across kinds the node
	// knows only as Definitions (package tracing's Tracer.Intercept). A
	// typed [Middleware] on a [Kind] is the way for one kind.
	Intercept Interceptor
}

// Interceptor runs around one attempt of a kind's logic: it must call next
// once, with c or a Context derived with [Context.WithContext], and return
// its error (or a wrapped one).
type Interceptor func(c *Context, next func(*Context) error) error

// withDefaults validates o and fills in defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for name, d := range map[string]time.Duration{"ShutdownGrace": o.ShutdownGrace, "Heartbeat": o.Heartbeat, "HeartbeatTTL": o.HeartbeatTTL, "StallAfter": o.StallAfter} {
		if d < 0 {
			return o, invalidf("NewNode: %s %s must not be negative", name, d)
		}
	}
	o.ShutdownGrace = orDefault(o.ShutdownGrace, 10*time.Second)
	o.Heartbeat = orDefault(o.Heartbeat, time.Second)
	o.HeartbeatTTL = orDefault(o.HeartbeatTTL, 3*o.Heartbeat)
	o.IdleTimeout = orDefault(o.IdleTimeout, 2*time.Minute)
	o.ClaimWorkers = orDefault(o.ClaimWorkers, 16)
	o.StallAfter = orDefault(o.StallAfter, 10*time.Second)
	o.SpreadLeaders = orDefault(o.SpreadLeaders, 15*time.Second)
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

// outputWindow is how many outputs a node may have published
// asynchronously and not yet seen acknowledged.
const outputWindow = 16384

// Node hosts kinds and drives their effectors: it serves the control
// endpoints for its kinds and consumes every live effector of those kinds.
type Node struct {
	conn    *bus.Conn
	names   bus.Names
	log     *slog.Logger
	opts    Options
	metrics *metrics

	mu      sync.Mutex // guards kinds and running
	kinds   map[string]*kindSpec
	running bool
	ready   atomic.Bool
	readyCh chan struct{} // closed once ready (WaitReady)
	doneCh  chan struct{} // closed when Run returns

	// The node's long-lived goroutines, by the group Run stops them with:
	// placeLoops runs placement (placement.watch-members, .watch-leases,
	// .heartbeat, .review, .detect, .reconciler, .sweep and a .probe per
	// suspect node), stopped before the node leaves; watchLoop runs
	// node.watch (the watchdog and the metrics of loaded effectors), stopped
	// last. Each effector's drain goroutine is its own (effector.drainers),
	// and each partition's deliveries run on nats.go's Consume goroutine.
	placeLoops, watchLoop routine.Group

	// crash, when set (by tests only), is asked at each step of processing
	// whether the node dies there; see crashPoint.
	crash func(point crashPoint, ref records.Ref, seq uint64) bool
	// answerLost, when set (by tests only), is asked after each state write
	// the server answered whether that answer is lost, with the effector's
	// partition given up at that moment (as when the node's connection
	// drops under a write and the post-reconnect check reads the partition
	// again): the write is stored, and the effector is told it is not.
	answerLost func(ref records.Ref, seq uint64) bool
	// ownerHook, when set (by tests only), overrides placement's choice of
	// the owner of partition num of kind where it returns true.
	ownerHook func(kind string, num int) (string, bool)
	// stealHook, when set (by tests only) and true, makes placement take
	// leases held by live nodes as if they were dead (a node whose view of
	// membership is wrong).
	stealHook func() bool

	// routes decides where records may be sent (Options.ReplySubjects).
	routes bus.Routes

	// Set by Run.
	// js is the node's own JetStream context: its window of asynchronous
	// publishes is not shared with other users of the connection.
	js jetstream.JetStream
	// pub is the node's synchronous publish on the hot path: a record's
	// single output, EmitNow, and the state's compare-and-set.
	pub    *bus.Publisher
	states *states
	// streams are the mailbox streams, one per stream group (groups.go).
	streams []jetstream.Stream
	// timerStream holds timers (timer.go).
	timerStream jetstream.Stream
	ids         *idSigner // signs output ids with bus.Conn.OutputKey, set by Run
	runCtx      context.Context
	// place is set by Run once the placement bucket is open, and read by
	// the metrics collector and control endpoints, which may run before:
	// hence atomic (a scrape of /metrics can come before Run).
	place atomic.Pointer[placement]
	// stalled is, per kind, how many effectors the watchdog last found
	// stalled: written by the watchdog, read by the metrics collector.
	stalled atomic.Pointer[map[string]int]
	// claim is how long this node may act on its leases by its own clock
	// (see fence.go, "Lapses"): renewed by placement's heartbeat, checked
	// by effectors before they publish.
	claim *claim
	// busy are the effectors with records held or in hand (busy.go).
	busy busySet
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
		conn:    conn,
		names:   conn.Names(),
		log:     opts.Logger,
		opts:    opts,
		kinds:   map[string]*kindSpec{},
		readyCh: make(chan struct{}),
		doneCh:  make(chan struct{}),
		claim:   newClaim(opts.HeartbeatTTL, conn.Disconnects),
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
		n.metrics.hosted(s.name)
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
	defer close(n.doneCh)

	// An acknowledgement lost with a stream leader's death would leave a
	// batch waiting for good: each asynchronous publish gives up as a
	// synchronous one does, after ackTimeout, and the batch publishes again
	// (ids make the second copy a duplicate).
	js, err := jetstream.New(n.conn.NATS(), jetstream.WithPublishAsyncMaxPending(outputWindow),
		jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	n.js = js
	// A write sent to a stream's leader as it stepped down or died may get
	// no answer at all: a leader election ends the wait for it, as a
	// dropped connection does (bus.Conn.FollowElections), and it is sent
	// again at once.
	if err := n.conn.FollowElections(); err != nil {
		n.log.Warn("leader elections not followed: a write unanswered across one is sent again after its timeout", "err", err, "fix", "allow subscribing to "+n.names.StreamLeaderElected())
	}
	pub, err := n.conn.Publisher(ackTimeout)
	if err != nil {
		return err
	}
	defer pub.Close()
	n.pub = pub
	streams, buckets, err := openGroups(ctx, n.conn)
	if err != nil {
		return err
	}
	n.streams, n.states = streams, newStates(buckets, n.names, kv.WithPublisher(pub))
	idKey, err := n.conn.OutputKey(ctx)
	if err != nil {
		return err
	}
	n.ids = newIDSigner(idKey)
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	n.runCtx = runCtx
	timers, err := n.startTimers(ctx)
	if err != nil {
		return err
	}
	defer func() { timers.stop(n.conn.State() == bus.StateConnected) }()

	placeBucket, err := n.conn.JetStream().KeyValue(ctx, n.names.PlaceBucket())
	if err != nil {
		return fmt.Errorf("bucket %s: %w (was it provisioned?)", n.names.PlaceBucket(), err)
	}
	place := newPlacement(n, placeBucket)
	// The heartbeats go over a connection of their own (DESIGN.md section
	// 6): they must not queue behind the node's records, outputs and state
	// writes, nor wait on that connection's reconnects.
	beatConn, err := n.conn.Side(ctx, "heartbeat")
	if err != nil {
		return fmt.Errorf("heartbeat connection: %w", err)
	}
	defer beatConn.Close()
	beatJS, err := jetstream.New(beatConn)
	if err != nil {
		return fmt.Errorf("heartbeat connection: jetstream: %w", err)
	}
	if place.beats, err = beatJS.KeyValue(ctx, n.names.PlaceBucket()); err != nil {
		return fmt.Errorf("heartbeat connection: bucket %s: %w", n.names.PlaceBucket(), err)
	}
	place.beatConn = beatConn
	n.place.Store(place)
	placeCtx, stopPlace := context.WithCancel(runCtx)
	stopPlacement := func() {
		stopPlace()
		n.placeLoops.Wait()
		leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		place.leave(leaveCtx)
		cancel()
	}
	if err := place.start(placeCtx, &n.placeLoops); err != nil {
		stopPlacement()
		return err
	}
	ctl, err := n.serveControl()
	if err != nil {
		stopPlacement()
		return err
	}
	// The server must have the control subscriptions before the node says it
	// is ready, or a client acting on /readyz could find no responder.
	flushCtx, cancelFlush := context.WithTimeout(ctx, 10*time.Second)
	err = n.conn.NATS().FlushWithContext(flushCtx)
	cancelFlush()
	if err != nil {
		ctl.stop()
		stopPlacement()
		return fmt.Errorf("register control endpoints: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(runCtx)
	n.watchLoop.Go("node.watch", func() { n.watch(watchCtx) })
	n.ready.Store(true)
	close(n.readyCh)
	n.log.Info("node ready", "node", n.opts.NodeID, "kinds", n.Kinds(), "partitions", len(n.partitions()))

	<-ctx.Done()
	n.ready.Store(false)
	n.log.Info("node stopping", "grace", n.opts.ShutdownGrace)
	ctl.stop()
	stopPlacement()
	stopWatch()
	n.watchLoop.Wait()
	n.log.Info("node stopped")
	return nil
}

// kindSpec returns the hosted kind name.
func (n *Node) kindSpec(name string) *kindSpec {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.kinds[name]
}

// partitions returns the partitions the node reads right now.
func (n *Node) partitions() []*partition {
	p := n.place.Load()
	if p == nil {
		return nil
	}
	p.readMu.Lock()
	defer p.readMu.Unlock()
	out := make([]*partition, 0, len(p.reading))
	for _, part := range p.reading {
		out = append(out, part)
	}
	return out
}

// loaded returns ref's effector if this node has it loaded.
func (n *Node) loaded(ref records.Ref) *effector {
	p := n.place.Load()
	if p == nil {
		return nil
	}
	s := slot{ref.Kind, n.names.Partition(ref)}
	p.readMu.Lock()
	part := p.reading[s]
	p.readMu.Unlock()
	if part == nil {
		return nil
	}
	return part.lookup(ref.ID)
}

// stalledByKind returns, per hosted kind, how many effectors the watchdog
// last found stalled.
func (n *Node) stalledByKind() map[string]int {
	out := make(map[string]int)
	for _, k := range n.Kinds() {
		out[k] = 0
	}
	if p := n.stalled.Load(); p != nil {
		for k, c := range *p {
			out[k] = c
		}
	}
	return out
}

// backlog sums, per kind, the records waiting for this node's effectors.
func (n *Node) backlog() map[string]int {
	out := make(map[string]int)
	for _, k := range n.Kinds() {
		out[k] = 0
	}
	for _, e := range n.busy.list() {
		out[e.ref.Kind] += e.backlog()
	}
	return out
}

// driven returns the effectors the node has loaded right now.
func (n *Node) driven() []*effector {
	var all []*effector
	for _, part := range n.partitions() {
		all = append(all, part.loaded()...)
	}
	return all
}

// crashPoint names a step of processing at which a test can make the node die.
type crashPoint int

const (
	afterOutputs crashPoint = iota + 1 // outputs published, state not written
	afterState                         // state written, record not acknowledged
)
