package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/bus"
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

	// Set by Run.
	states *kv.Store[Document]
	stream jetstream.Stream
	runCtx context.Context
}

// NewNode returns a node on conn. Host kinds on it, then Run it.
func NewNode(conn *bus.Conn, opts Options) (*Node, error) {
	if conn == nil {
		return nil, invalidf("NewNode: conn is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownGrace < 0 {
		return nil, invalidf("NewNode: ShutdownGrace %s must not be negative", opts.ShutdownGrace)
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = 10 * time.Second
	}
	n := &Node{
		conn:      conn,
		names:     conn.Names(),
		log:       opts.Logger,
		opts:      opts,
		kinds:     map[string]*kindSpec{},
		effectors: map[records.Ref]*effector{},
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
	n.states = kv.New[Document](bucket)
	if n.stream, err = n.conn.Stream(ctx); err != nil {
		return err
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	n.runCtx = runCtx

	if err := n.attachAll(ctx); err != nil {
		n.stopAll()
		return err
	}
	ctl, err := n.serveControl()
	if err != nil {
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
		n.stopAll()
		return fmt.Errorf("register control endpoints: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(runCtx)
	watched := make(chan struct{})
	go func() { defer close(watched); n.watch(watchCtx) }()
	n.ready.Store(true)
	n.log.Info("node ready", "kinds", n.Kinds(), "effectors", n.count())

	<-ctx.Done()
	n.ready.Store(false)
	n.log.Info("node stopping", "grace", n.opts.ShutdownGrace)
	ctl.stop()
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

// attachAll attaches every live effector of the hosted kinds.
func (n *Node) attachAll(ctx context.Context) error {
	for _, kind := range n.Kinds() {
		var docs []kv.Entry[Document]
		keys, err := n.states.Keys(ctx, kind+".*")
		if err != nil {
			return fmt.Errorf("list effectors of kind %s: %w", kind, err)
		}
		for _, key := range keys {
			ent, err := n.states.Get(ctx, key)
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read state %s: %w", key, err)
			}
			if ent.Value.Status != StatusTerminated {
				docs = append(docs, ent)
			}
		}
		for _, ent := range docs {
			if err := n.attach(ctx, ent.Value, ent.Revision); err != nil {
				return err
			}
		}
	}
	return nil
}

// attach starts driving the effector of doc. The consumer is reused when it
// holds no unacknowledged record; otherwise it is recreated to start right
// after the document's Seq, so nothing is applied out of order.
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
		Durable:       consumerName(ref),
		Description:   "mailbox of " + ref.String(),
		FilterSubject: n.names.Mailbox(ref),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       k.ackWait,
		MaxDeliver:    -1,
		MaxAckPending: k.prefetch,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if doc.Seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, doc.Seq+1
	}
	cons, err := n.stream.Consumer(ctx, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		cons, err = n.stream.CreateConsumer(ctx, cfg)
	case err == nil:
		info := cons.CachedInfo()
		if info.NumAckPending > 0 || info.Config.AckWait != cfg.AckWait || info.Config.MaxAckPending != cfg.MaxAckPending {
			if err = n.stream.DeleteConsumer(ctx, cfg.Durable); err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
				cons, err = n.stream.CreateConsumer(ctx, cfg)
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
				go n.detach(ref, e)
				return
			}
			e.log.Debug("consume", "err", err)
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
