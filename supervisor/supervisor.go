package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/tracing"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

// MailboxKind is the kind part of the supervisors' mailboxes: the results
// of orchestration <id>'s tasks go to <prefix>.mbox.supervisor.<id>.
const MailboxKind = "supervisor"

// TimerKind is the kind part of the subjects of task timeouts:
// <prefix>.mbox.supervisor-timer.<orchestration id> (see Timeout). A
// timeout is a durable timer (docs/timers.md): its schedule waits in the
// timer stream, and a node forwards the record here when it is due.
const TimerKind = "supervisor-timer"

// TimerConsumerName is the durable consumer of task timeouts. A timeout
// record that arrives before it is due (timeouts set by an older release
// were published at once) is negatively acknowledged with a delay until it
// is, so it stays pending meanwhile: this consumer allows MaxTimers of them.
const TimerConsumerName = "supervisor-timers"

// MaxTimers is how many task timeouts may be pending at once.
const MaxTimers = 100_000

// DefaultAckWait is [Options.AckWait] when it is left 0: a record a dead
// supervisor took reaches another within it, as a node's records do within
// its lease TTL (3 s by default) plus a second or two.
const DefaultAckWait = 5 * time.Second

// ConsumerName is the durable consumer every supervisor process pulls the
// supervisors' mailboxes from (<prefix>.mbox.supervisor.>): records are
// shared out among the processes running.
const ConsumerName = "supervisors"

// maxEarlyDeliveries bounds the deliveries of a result that answers no
// known task yet (about 2 seconds of retries) before it is dropped.
const maxEarlyDeliveries = 10

// Options configure a Supervisor. The zero value is valid.
type Options struct {
	// Logger receives the supervisor's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the supervisor's Prometheus metrics. Nil: not
	// registered.
	Registerer prometheus.Registerer
	// AckWait is how long the server waits for a mailbox record (a result,
	// a timeout, a dead letter) to be acknowledged before it delivers it
	// again, to any supervisor: how long a record a supervisor took waits
	// when that supervisor dies. A record being applied is kept in progress
	// meanwhile, so a slow change is not handed to another supervisor.
	// Default 5s, at least 1s.
	AckWait time.Duration
	// RequestTimeout bounds the work of one API request, and of one change
	// a record brings (a graph node asking a model runs inside it) unless
	// AckWait is longer. Default 30s.
	RequestTimeout time.Duration
	// Tracer, when set, traces every step: a span per change of an
	// orchestration (start, result, input, cancel), child of the span that
	// published the worker's result (or of the caller's), and the task
	// records a step sends carry it as their parent. Nil: tracing off.
	Tracer *tracing.Tracer
}

// Supervisor runs orchestrations: it serves the orchestration API
// (<prefix>.orch.start, status, input, cancel) as a NATS micro service and
// consumes the supervisors' mailboxes, where workers' result records
// arrive. Several supervisor processes may run on one NATS: requests and
// records are shared among them, and compare-and-set on each
// orchestration's record keeps every change applied once.
//
// Between changes an orchestration holds nothing in memory: it is its
// record in KV, so a supervisor can stop at any moment and another (or the
// same, restarted) picks it up.
type Supervisor struct {
	conn   *bus.Conn
	names  bus.Names
	routes bus.Routes
	log    *slog.Logger
	opts   Options
	m      *metrics

	mu      sync.Mutex
	defs    map[string]Definition
	running bool
	ensured map[records.Ref]bool
	locks   map[string]*idLock
	// told: the Steps of each orchestration whose latest status record
	// this supervisor wrote (story.go).
	told map[string]int
	// dieBeforeTell, set by tests, makes tell return without writing, as
	// if the process died between a change and its status record.
	dieBeforeTell func(id string, steps int) bool

	ready   atomic.Bool
	started atomic.Bool // store, client and runCtx are set
	store   *kv.Store[orchRecord]
	client  *actor.Client
	runCtx  context.Context
	idKey   []byte // signs task record ids (taskRecordID)
}

// idLock serializes the changes of one orchestration within this process.
type idLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a supervisor on conn. Register definitions, then Run it.
func New(conn *bus.Conn, opts Options) (*Supervisor, error) {
	if conn == nil || conn.NATS() == nil {
		return nil, invalidf("new supervisor: conn is nil: pass a connected *bus.Conn")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.AckWait == 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.AckWait < time.Second || opts.RequestTimeout < 0 {
		return nil, invalidf("new supervisor: AckWait %s must be at least 1s and RequestTimeout %s positive", opts.AckWait, opts.RequestTimeout)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	routes, err := conn.Names().Routes(nil)
	if err != nil {
		return nil, fmt.Errorf("new supervisor: %w", err)
	}
	return &Supervisor{
		conn: conn, names: conn.Names(), routes: routes, log: opts.Logger, opts: opts, m: m,
		defs: map[string]Definition{}, ensured: map[records.Ref]bool{}, locks: map[string]*idLock{}, told: map[string]int{},
	}, nil
}

// Register adds orchestration definitions. It must be called before Run;
// a name registered twice is an error, and so is a Definition already
// registered on another Supervisor (make one per supervisor).
func (s *Supervisor) Register(defs ...Definition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return invalidf("register: the supervisor is running: register before Run")
	}
	seen := map[string]bool{}
	for _, d := range defs {
		if d == nil {
			return invalidf("register: nil definition: make one with Define")
		}
		name := d.Name()
		if _, dup := s.defs[name]; dup || seen[name] {
			return invalidf("register: orchestration %q registered twice", name)
		}
		seen[name] = true
	}
	for _, d := range defs {
		// Its checkpointer holds one run per orchestration at a time, which
		// this supervisor's per-id lock guarantees and another's would not.
		if !d.claim() {
			return invalidf("register: definition %q is already registered on a supervisor: call Define (or Demo) again for each supervisor", d.Name())
		}
		s.defs[d.Name()] = d
	}
	return nil
}

// Names returns the names of the registered definitions, sorted.
func (s *Supervisor) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.defs))
	for n := range s.defs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Ready reports whether the supervisor consumes its mailboxes and serves the
// API.
func (s *Supervisor) Ready() bool { return s.ready.Load() }

// Mailbox returns the subject the results of orchestration id's tasks go to.
func (s *Supervisor) Mailbox(id string) string {
	return s.names.Mailbox(records.Ref{Kind: MailboxKind, ID: id})
}

// Run serves until ctx ends, then stops: it stops answering requests and
// taking records (a record in hand is finished first) and returns nil.
// The connection must be provisioned (bus.Conn.Provision).
func (s *Supervisor) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return invalidf("run: the supervisor is already running")
	}
	s.running = true
	s.mu.Unlock()

	store, err := kv.Open[orchRecord](ctx, s.conn.JetStream(), s.names.OrchBucket())
	if err != nil {
		return fmt.Errorf("supervisor: %w (provision the connection first)", err)
	}
	client, err := actor.NewClient(ctx, s.conn)
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	idKey, err := s.conn.OutputKey(ctx)
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	s.store, s.client, s.runCtx, s.idKey = store, client, ctx, idKey
	s.started.Store(true)

	// With stream groups the supervisors' mailboxes (and the timeouts')
	// are spread over every group's mailbox stream: one consumer each.
	var consumes []jetstream.ConsumeContext
	defer func() {
		for _, cc := range slices.Backward(consumes) {
			cc.Drain()
			<-cc.Closed()
		}
	}()
	for g := range s.names.Groups() {
		stream, err := s.conn.MailboxStreamOf(ctx, g)
		if err != nil {
			return fmt.Errorf("supervisor: %w", err)
		}
		cc, err := s.consumeMailboxes(ctx, stream)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		consumes = append(consumes, cc)
		tc, err := s.consumeTimers(ctx, stream)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		consumes = append(consumes, tc)
	}
	dc, err := s.consumeDead(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		dc.Drain()
		<-dc.Closed()
	}()

	svc, err := micro.AddService(s.conn.NATS(), micro.Config{
		Name:        s.names.OrchService(),
		Version:     "0.1.0",
		Description: "effectors orchestrations: start, status, input, cancel",
	})
	if err != nil {
		return fmt.Errorf("supervisor: start the orchestration service: %w", err)
	}
	defer func() { _ = svc.Stop() }()
	for _, op := range []string{OpStart, OpStatus, OpInput, OpCancel} {
		err := svc.AddEndpoint(op, micro.HandlerFunc(func(req micro.Request) { s.serve(op, req) }),
			micro.WithEndpointSubject(s.names.Orch(op)),
			micro.WithEndpointMetadata(map[string]string{"format": "application/json"}))
		if err != nil {
			return fmt.Errorf("supervisor: add endpoint %s: %w", s.names.Orch(op), err)
		}
	}
	if err := s.conn.NATS().Flush(); err != nil {
		return fmt.Errorf("supervisor: flush subscriptions: %w", err)
	}
	s.ready.Store(true)
	s.log.Info("supervisor ready", "orchestrations", strings.Join(s.Names(), ","), "api", s.names.Orchestrations())
	<-ctx.Done()
	s.ready.Store(false)
	return nil
}

// serve answers one API request.
func (s *Supervisor) serve(op string, req micro.Request) {
	ctx, cancel := context.WithTimeout(s.runCtx, s.opts.RequestTimeout)
	defer cancel()
	if s.opts.Tracer != nil {
		ctx = tracectx.ExtractHeader(ctx, nats.Header(req.Headers())) // the caller's trace
	}
	rep, err := s.handle(ctx, op, req.Data())
	var body []byte
	if err == nil {
		if body, err = json.Marshal(rep); err != nil {
			err = fmt.Errorf("encode the reply to %s: %w", op, err)
		}
	}
	if err != nil && codeOf(err) == CodeInternal {
		s.log.Error("orchestration request failed", "op", op, "err", errorText(err))
	}
	apiErrors.Respond(req, body, err)
}

func (s *Supervisor) handle(ctx context.Context, op string, data []byte) (any, error) {
	if err := checkSize(data); err != nil {
		return nil, err
	}
	switch op {
	case OpStart:
		var r StartRequest
		if err := decodeStrict(data, &r, `{"name": "demo", "input": {...}}`); err != nil {
			return nil, err
		}
		id, err := s.StartOwned(ctx, r.Name, r.Input, r.Owner)
		if err != nil {
			return nil, err
		}
		return StartReply{ID: id}, nil
	case OpStatus:
		var r IDRequest
		if err := decodeStrict(data, &r, `{"id": "<orchestration id>"}`); err != nil {
			return nil, err
		}
		return s.Status(ctx, r.ID)
	case OpInput:
		var r InputRequest
		if err := decodeStrict(data, &r, `{"id": "<orchestration id>", "input": {...}}`); err != nil {
			return nil, err
		}
		st, err := s.Input(ctx, r.ID, r.Input)
		if err != nil {
			return nil, err
		}
		return OKReply{ID: r.ID, Status: st}, nil
	case OpCancel:
		var r IDRequest
		if err := decodeStrict(data, &r, `{"id": "<orchestration id>"}`); err != nil {
			return nil, err
		}
		if err := s.Cancel(ctx, r.ID); err != nil {
			return nil, err
		}
		return OKReply{ID: r.ID, Status: StatusCancelled}, nil
	}
	return nil, invalidf("unknown operation %s", echo(op))
}

// decodeStrict decodes a request body into v (see [service.Decode]); its
// errors match ErrInvalid.
func decodeStrict(data []byte, v any, want string) error {
	if err := service.Decode(data, v, MaxRequestSize, want); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// checkStarted fails calls made before Run has set the supervisor up.
func (s *Supervisor) checkStarted() error {
	if !s.started.Load() {
		return fmt.Errorf("%w: the supervisor is not running: call Run first", ErrUnavailable)
	}
	return nil
}

func validID(id string) error {
	if id == "" {
		return invalidf("empty orchestration id: pass the id Start returned")
	}
	if len(id) > MaxFieldLength {
		return invalidf("orchestration id %s is %d bytes: an id is 1-%d of [A-Za-z0-9_-]; pass the id Start returned", echo(id), len(id), MaxFieldLength)
	}
	if err := records.ValidateID(id); err != nil {
		return invalidf("orchestration id %s: %v", echo(id), err)
	}
	return nil
}

// Start starts orchestration name with input (JSON; empty for null) and
// returns its id: the first steps have run, and the tasks they send are
// published, when it returns.
func (s *Supervisor) Start(ctx context.Context, name string, input json.RawMessage) (string, error) {
	return s.StartOwned(ctx, name, input, "")
}

// StartOwned is [Supervisor.Start] of an orchestration that belongs to
// owner (a user or tenant id, the EA-Owner rule; empty for none): its record,
// task and status records carry it.
func (s *Supervisor) StartOwned(ctx context.Context, name string, input json.RawMessage, owner string) (string, error) {
	if err := s.checkStarted(); err != nil {
		return "", err
	}
	if owner != "" {
		if err := records.ValidateOwner(owner); err != nil {
			return "", invalidf("owner: %v", err)
		}
	}
	if err := checkName(name); err != nil {
		return "", err
	}
	s.mu.Lock()
	def, ok := s.defs[name]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("%w %s: this supervisor runs %s", ErrUnknownName, echo(name), strings.Join(s.Names(), ", "))
	}
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if !json.Valid(input) {
		return "", invalidf("input of %q is not valid JSON", name)
	}
	for _, w := range def.workers() {
		if err := s.ensureWorker(ctx, w); err != nil {
			return "", err
		}
	}
	id := records.NewID()
	if _, err := s.advance(ctx, id, event{kind: evStart, def: def, input: input, owner: owner}); err != nil {
		return "", err
	}
	return id, nil
}

// Status returns orchestration id as it stands.
func (s *Supervisor) Status(ctx context.Context, id string) (Orchestration, error) {
	if err := s.checkStarted(); err != nil {
		return Orchestration{}, err
	}
	if err := validID(id); err != nil {
		return Orchestration{}, err
	}
	e, err := s.store.Get(ctx, id)
	if errors.Is(err, kv.ErrNotFound) {
		return Orchestration{}, fmt.Errorf("%w %q", ErrUnknownOrchestration, id)
	}
	if err != nil {
		return Orchestration{}, err
	}
	return e.Value.view(), nil
}

// Input resumes orchestration id, WAITING for input, with input (JSON).
func (s *Supervisor) Input(ctx context.Context, id string, input json.RawMessage) (Status, error) {
	if err := s.checkStarted(); err != nil {
		return "", err
	}
	if err := validID(id); err != nil {
		return "", err
	}
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if !json.Valid(input) {
		return "", invalidf("input to %s is not valid JSON", id)
	}
	r, err := s.advance(ctx, id, event{kind: evInput, input: input})
	if err != nil {
		return "", err
	}
	return r.Status, nil
}

// Cancel cancels orchestration id and its outstanding tasks.
func (s *Supervisor) Cancel(ctx context.Context, id string) error {
	if err := s.checkStarted(); err != nil {
		return err
	}
	if err := validID(id); err != nil {
		return err
	}
	_, err := s.advance(ctx, id, event{kind: evCancel})
	return err
}

// handleRecord takes one record from the supervisors' mailboxes.
func (s *Supervisor) handleRecord(m jetstream.Msg) {
	ref, ok := s.names.RefOf(m.Subject())
	if !ok || ref.Kind != MailboxKind {
		s.drop(m, "malformed", "record on an unexpected subject", "subject", m.Subject())
		return
	}
	rec, err := records.FromMsg(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		s.drop(m, "malformed", "malformed record", "subject", m.Subject(), "err", err)
		return
	}
	if rec.Type != answerResult && rec.Type != answerError {
		s.drop(m, "type", "record of a type supervisors do not take (want result or error)", "orchestration", ref.ID, "type", rec.Type)
		return
	}
	s.applyResult(m, ref.ID, rec)
}

// consumeDead follows the dead letters of every effector and turns those of
// tasks sent by supervisors (their EA-Reply is a supervisor mailbox) into
// error answers, so that a task its worker could not process (bad payload,
// logic failing for good, a panic) does not leave its orchestration
// waiting forever.
func (s *Supervisor) consumeDead(ctx context.Context) (jetstream.ConsumeContext, error) {
	stream, err := s.conn.JetStream().Stream(ctx, s.names.DeadStream())
	if err != nil {
		return nil, fmt.Errorf("supervisor: stream %s: %w (was it provisioned?)", s.names.DeadStream(), err)
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "dead letters, for the tasks of orchestrations",
		FilterSubject: s.names.DeadLetters(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.opts.AckWait,
		MaxAckPending: 256,
		// Dead letters from before the first supervisor ran cannot be tasks.
		DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("supervisor: create consumer %s on %s: %w", ConsumerName, s.names.DeadStream(), err)
	}
	cc, err := cons.Consume(s.handleDead, jetstream.PullMaxMessages(64))
	if err != nil {
		return nil, fmt.Errorf("supervisor: consume dead letters: %w", err)
	}
	return cc, nil
}

// consumeMailboxes follows the supervisors' mailboxes in stream: the
// results of tasks.
func (s *Supervisor) consumeMailboxes(ctx context.Context, stream jetstream.Stream) (jetstream.ConsumeContext, error) {
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "supervisors' mailboxes: results of orchestration tasks",
		FilterSubject: s.names.KindMailboxes(MailboxKind),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.opts.AckWait,
		MaxAckPending: 256,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("supervisor: create consumer %s on %s: %w", ConsumerName, stream.CachedInfo().Config.Name, err)
	}
	cc, err := cons.Consume(s.handleRecord, jetstream.PullMaxMessages(64))
	if err != nil {
		return nil, fmt.Errorf("supervisor: consume: %w", err)
	}
	return cc, nil
}

// consumeTimers follows task timeouts in stream.
func (s *Supervisor) consumeTimers(ctx context.Context, stream jetstream.Stream) (jetstream.ConsumeContext, error) {
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       TimerConsumerName,
		Description:   "timeouts of orchestration tasks",
		FilterSubject: s.names.KindMailboxes(TimerKind),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.opts.AckWait,
		MaxAckPending: MaxTimers,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("supervisor: create consumer %s: %w", TimerConsumerName, err)
	}
	cc, err := cons.Consume(s.handleTimer, jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, fmt.Errorf("supervisor: consume timeouts: %w", err)
	}
	return cc, nil
}

// handleTimer takes one timeout record: before it is due it is asked for
// again when it is; when due, and the task still has no answer, the step
// gets an error answer.
func (s *Supervisor) handleTimer(m jetstream.Msg) {
	ref, ok := s.names.RefOf(m.Subject())
	rec, err := records.FromMsg(m.Subject(), m.Headers(), m.Data())
	var tm timer
	if err == nil {
		err = rec.Decode(&tm)
	}
	if !ok || err != nil || rec.Type != "timeout" || rec.Cause == "" {
		s.drop(m, "malformed", "malformed timeout record", "subject", m.Subject(), "err", err)
		return
	}
	if wait := time.Until(tm.Due); wait > 0 {
		_ = m.NakWithDelay(wait)
		return
	}
	worker, _ := records.ParseRef(tm.Worker)
	body, err := json.Marshal(map[string]string{"error": "no answer within " + tm.After})
	if err != nil {
		_ = m.Ack()
		return
	}
	answer := records.Record{
		ID: "timeout:" + rec.Cause, Type: answerError, From: worker, Process: ref.ID, Cause: rec.Cause,
		ContentType: records.ContentJSON, Payload: body, Time: time.Now().UTC(),
		TraceParent: rec.TraceParent, TraceState: rec.TraceState,
	}
	s.applyResult(m, ref.ID, answer)
}

// handleDead takes one dead letter: a task of an orchestration becomes an
// "error" answer from its worker; anything else is acknowledged.
func (s *Supervisor) handleDead(m jetstream.Msg) {
	h := m.Headers()
	reply := h.Get(records.HeaderReply)
	orch, ok := s.names.RefOf(reply)
	worker, wok := s.names.RefOf(m.Subject())
	taskID := strings.TrimPrefix(h.Get(records.HeaderID), "dead:")
	if !ok || !wok || orch.Kind != MailboxKind || reply != s.Mailbox(orch.ID) || taskID == "" {
		_ = m.Ack() // not a task of an orchestration
		return
	}
	body, err := json.Marshal(map[string]string{"error": fmt.Sprintf("the worker could not process the task (dead letter, reason %s): %s",
		h.Get(actor.HeaderDeadReason), h.Get(records.HeaderError))})
	if err != nil {
		_ = m.Ack()
		return
	}
	rec := records.Record{
		ID: "dead:" + taskID, Type: answerError, From: worker, Process: orch.ID, Cause: taskID,
		ContentType: records.ContentJSON, Payload: body, Time: time.Now().UTC(),
	}
	s.applyResult(m, orch.ID, rec)
}

// applyResult applies a worker's answer rec to orchestration id and
// acknowledges m, or asks for it again later.
func (s *Supervisor) applyResult(m jetstream.Msg, id string, rec records.Record) {
	ctx, cancel := context.WithTimeout(s.runCtx, max(s.opts.AckWait, s.opts.RequestTimeout))
	defer cancel()
	stop := keepInProgress(m, s.opts.AckWait/3)
	_, err := s.advance(ctx, id, event{kind: evResult, rec: rec})
	stop()
	var st *staleError
	switch {
	case err == nil:
		_ = m.Ack()
	case errors.As(err, &st) && strings.HasPrefix(rec.ID, "timeout:"):
		_ = m.Ack() // the task was answered (or the orchestration ended) in time
	case errors.As(err, &st):
		s.drop(m, "stale", "record no longer awaited", "orchestration", id, "record", rec.ID, "why", st.why)
	case errors.Is(err, errEarly), errors.Is(err, ErrUnknownOrchestration):
		// The change that sent the task may not be written yet (another
		// supervisor is between publishing the task and writing the record):
		// try again shortly, a bounded number of times.
		n := uint64(1)
		if md, mdErr := m.Metadata(); mdErr == nil {
			n = md.NumDelivered
		}
		if n >= maxEarlyDeliveries {
			reason := "stale"
			if errors.Is(err, ErrUnknownOrchestration) {
				reason = "unknown"
			}
			s.drop(m, reason, "record for no known task after retries", "orchestration", id, "record", rec.ID, "err", err)
			return
		}
		_ = m.NakWithDelay(time.Duration(n) * 50 * time.Millisecond)
	default:
		delay := time.Second
		if md, mdErr := m.Metadata(); mdErr == nil {
			delay = min(time.Duration(md.NumDelivered)*time.Second, 30*time.Second)
		}
		if s.runCtx.Err() == nil {
			s.log.Warn("applying a result failed; will retry", "orchestration", id, "record", rec.ID, "err", err, "retry_in", delay)
		}
		_ = m.NakWithDelay(delay)
	}
}

// keepInProgress tells the server every period that m is still being
// worked on, until the returned stop is called (after which it sends
// nothing more): a change slower than the ack wait (a model's answer, a
// write waiting on an election) keeps its record rather than having it
// delivered to another supervisor meanwhile.
func keepInProgress(m jetstream.Msg, period time.Duration) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(period, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = m.InProgress()
		t.Reset(period)
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

func (s *Supervisor) drop(m jetstream.Msg, reason, msg string, args ...any) {
	s.m.dropped.WithLabelValues(reason).Inc()
	s.log.Debug(msg, args...)
	_ = m.Ack()
}

// lock serializes changes to orchestration id within this process; other
// processes are kept apart by compare-and-set.
func (s *Supervisor) lock(id string) func() {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &idLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}
