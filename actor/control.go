package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Control operations, the <op> of <prefix>.ctl.<op>.<kind>.
const (
	opCreate    = "create"
	opTerminate = "terminate"
	opReset     = "reset"
	opState     = "state"
	opActivate  = "activate"
	// opRetire is not an endpoint: nodes hosting a kind are told on
	// <prefix>.ctl.retire.<kind> that one of its effectors was terminated.
	opRetire = "retire"
)

// Reasons of control error replies (header EA-Error-Reason), each standing
// for the sentinel of [controlErrors].
const (
	reasonInvalid   = "invalid"
	reasonNotFound  = "not_found"
	reasonExists    = "exists"
	reasonCorrupt   = "corrupt_state"
	reasonGone      = "terminated"
	reasonNoHost    = "no_host"
	reasonNotLoaded = "not_loaded"
)

// controlErrors maps the control endpoints' errors to codes and reasons, for
// the node answering and the [Client] reading the answer alike.
var controlErrors = service.Table{
	{Err: ErrInvalid, Code: 400, Reason: reasonInvalid},
	{Err: ErrNotFound, Code: 404, Reason: reasonNotFound},
	{Err: ErrExists, Code: 409, Reason: reasonExists},
	{Err: ErrCorruptState, Code: 409, Reason: reasonCorrupt},
	{Err: ErrTerminated, Code: 410, Reason: reasonGone},
	{Err: ErrNoHost, Code: 503, Reason: reasonNoHost},
	{Err: ErrNotLoaded, Code: 503, Reason: reasonNotLoaded},
}

// failf returns the control error for sentinel (an Err of controlErrors)
// with a message.
func failf(sentinel error, format string, args ...any) error {
	for _, e := range controlErrors {
		if e.Err == sentinel {
			return &ControlError{Code: e.Code, Reason: e.Reason, Message: fmt.Sprintf(format, args...)}
		}
	}
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// CreateRequest is the JSON body of a create request.
type CreateRequest struct {
	ID string `json:"id"`
	// State is the initial state as JSON; empty for the kind's Initial.
	State json.RawMessage `json:"state,omitempty"`
	// Owner is the user or tenant the effector belongs to (optional).
	Owner string `json:"owner,omitempty"`
}

// TerminateRequest is the JSON body of a terminate request.
type TerminateRequest struct {
	ID string `json:"id"`
}

// ResetRequest is the JSON body of a reset request: it replaces the state
// document of an existing effector, corrupt or not, with a valid one.
type ResetRequest struct {
	ID string `json:"id"`
	// State is the new state as JSON; empty for the kind's Initial.
	State json.RawMessage `json:"state,omitempty"`
}

// IDRequest is the JSON body of the state and activate requests.
type IDRequest struct {
	ID string `json:"id"`
}

// Examples of valid bodies, shown in the errors of invalid ones.
const (
	wantID    = `{"id": "c1"}`
	wantState = `{"id": "c1", "state": {...}}`
)

// MaxControlRequest is the largest control request body a node takes, in
// bytes (512 KiB): its reply, the state document as JSON, must fit in a
// NATS message too.
const MaxControlRequest = 512 << 10

// control is the node's control plane: the public micro service endpoints
// <prefix>.ctl.<op>.* answered by any node, the internal subjects
// <prefix>.ctl.host.<op>.<kind> answered by the nodes hosting <kind>, and
// <prefix>.ctl.node.<node>.activate.<kind> answered by this node alone. A
// public request for a kind this node does not host is forwarded to the
// internal subject; no responder there means no node hosts the kind (503).
type control struct {
	conn   *bus.Conn
	svc    micro.Service
	subs   []*nats.Subscription
	strays []jetstream.ConsumeContext // see stray.go
}

func (c *control) stop() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
	if c.svc != nil {
		_ = c.svc.Stop()
	}
	// Draining waits for the pull requests in flight to end: pointless
	// while NATS is out of reach, where it only held a stopping node up.
	drain := c.conn.State() == bus.StateConnected
	for _, cc := range c.strays {
		if drain {
			cc.Drain()
		} else {
			cc.Stop()
		}
	}
	for _, cc := range c.strays {
		<-cc.Closed()
	}
}

// controlOps are the public control operations; hostOps those answered by a
// node hosting the kind (state is answered by any node).
var (
	controlOps = []string{opCreate, opTerminate, opReset, opState, opActivate, opReplay, opTimerSet, opTimerCancel, opTimerList, opKind}
	hostOps    = []string{opCreate, opTerminate, opReset, opActivate, opReplay, opKind}
)

func (n *Node) serveControl() (*control, error) {
	c := &control{conn: n.conn}
	ctx, cancel := context.WithTimeout(n.runCtx, 30*time.Second)
	defer cancel()
	for _, kind := range n.Kinds() {
		cc, err := n.consumeStrays(ctx, kind)
		if err != nil {
			c.stop()
			return nil, err
		}
		if cc != nil {
			c.strays = append(c.strays, cc)
		}
	}
	sub := func(subject, queue string, h nats.MsgHandler) error {
		var s *nats.Subscription
		var err error
		if queue == "" {
			s, err = n.conn.NATS().Subscribe(subject, h)
		} else {
			s, err = n.conn.NATS().QueueSubscribe(subject, queue, h)
		}
		if err != nil {
			c.stop()
			return fmt.Errorf("subscribe %s: %w", subject, err)
		}
		c.subs = append(c.subs, s)
		return nil
	}
	for _, kind := range n.Kinds() {
		for _, op := range hostOps {
			err := sub(n.names.HostControl(op, kind), "ea-hosts", func(m *nats.Msg) {
				body, err := n.handleControl(op, kind, m.Data)
				controlErrors.Reply(m, body, err)
			})
			if err != nil {
				return nil, err
			}
		}
		err := sub(n.names.NodeControl(n.opts.NodeID, opActivate, kind), "", func(m *nats.Msg) {
			body, err := n.activateHere(kind, m.Data)
			controlErrors.Reply(m, body, err)
		})
		if err != nil {
			return nil, err
		}
		if err := sub(n.names.Control(opRetire, kind), "", func(m *nats.Msg) { n.onRetire(kind, m.Data) }); err != nil {
			return nil, err
		}
		if err := sub(n.names.NodeControl(n.opts.NodeID, opInterrupt, kind), "", func(m *nats.Msg) { n.onInterrupt(kind, m) }); err != nil {
			return nil, err
		}
	}
	svc, err := micro.AddService(n.conn.NATS(), micro.Config{
		Name:        n.names.Service(),
		Version:     "0.1.0",
		Description: "effectors control: create, terminate, reset, activate and replay effectors, read their state, and describe a kind",
	})
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("start control service: %w", err)
	}
	c.svc = svc
	for _, op := range controlOps {
		subject := n.names.Control(op, "*")
		err := svc.AddEndpoint(op, micro.HandlerFunc(func(req micro.Request) { n.servePublic(op, req) }),
			micro.WithEndpointSubject(subject),
			micro.WithEndpointMetadata(map[string]string{"format": "application/json"}))
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("add control endpoint %s: %w", subject, err)
		}
	}
	return c, nil
}

// servePublic answers <prefix>.ctl.<op>.<kind>: state at once, the other
// operations locally when this node hosts the kind, else through a node
// that does.
func (n *Node) servePublic(op string, req micro.Request) {
	kind := req.Subject()[strings.LastIndexByte(req.Subject(), '.')+1:]
	if op == opState {
		body, err := n.state(kind, req.Data())
		controlErrors.Respond(req, body, err)
		return
	}
	if isTimerOp(op) {
		body, err := n.serveTimer(op, kind, req.Data())
		controlErrors.Respond(req, body, err)
		return
	}
	n.mu.Lock()
	_, local := n.kinds[kind]
	n.mu.Unlock()
	if local {
		body, err := n.handleControl(op, kind, req.Data())
		controlErrors.Respond(req, body, err)
		return
	}
	if err := records.ValidateKind(kind); err != nil {
		controlErrors.Respond(req, nil, failf(ErrInvalid, "%v", err))
		return
	}
	body, err := n.forward(n.names.HostControl(op, kind), req.Data())
	if errors.Is(err, nats.ErrNoResponders) {
		err = failf(ErrNoHost, "no node hosts kind %q: start a node that hosts it", kind)
	} else if err != nil && !errors.As(err, new(*service.Error)) {
		err = fmt.Errorf("forward %s of kind %q: %w", op, kind, err)
	}
	controlErrors.Respond(req, body, err)
}

// forward sends a control request on to subject and returns the reply, or
// the error it carries (a [*service.Error], relayed as it is).
func (n *Node) forward(subject string, data []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(n.runCtx, 10*time.Second)
	defer cancel()
	msg, err := n.conn.NATS().RequestWithContext(ctx, subject, data)
	if err != nil {
		return nil, err
	}
	if se := service.ErrorOf(msg); se != nil {
		return nil, se
	}
	return msg.Data, nil
}

// handleControl runs a control operation for a hosted kind and returns the
// JSON reply.
func (n *Node) handleControl(op, kind string, data []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(n.runCtx, 30*time.Second)
	defer cancel()
	var doc Document
	var err error
	switch op {
	case opCreate:
		doc, err = n.create(ctx, kind, data)
	case opTerminate:
		doc, err = n.terminate(ctx, kind, data)
	case opReset:
		doc, err = n.reset(ctx, kind, data)
	case opActivate:
		return n.activate(kind, data)
	case opReplay:
		return n.replayControl(ctx, kind, data)
	case opKind:
		return n.kindControl(ctx, kind, data)
	default:
		err = failf(ErrInvalid, "unknown control operation %s", service.Quote(op))
	}
	if err != nil {
		return nil, err
	}
	return renderDocument(doc)
}

// renderDocument is the JSON reply of a document.
func renderDocument(doc Document) ([]byte, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode state document of %s as JSON: %w", doc.Ref(), err)
	}
	return body, nil
}

// decodeRequest decodes a control request body into v, strictly; errors are
// 400s.
func decodeRequest(data []byte, v any, want string) error {
	if err := service.Decode(data, v, MaxControlRequest, want); err != nil {
		return failf(ErrInvalid, "%v", err)
	}
	return nil
}

// requestRef decodes an {"id"} control request for kind into the effector
// it names.
func requestRef(kind string, data []byte) (records.Ref, error) {
	var req IDRequest
	if err := decodeRequest(data, &req, wantID); err != nil {
		return records.Ref{}, err
	}
	return checkedRef(kind, req.ID)
}

// checkedRef is kind/id, or a 400 saying what is wrong with it.
func checkedRef(kind, id string) (records.Ref, error) {
	ref := records.Ref{Kind: kind, ID: id}
	if err := ref.Validate(); err != nil {
		return ref, failf(ErrInvalid, "%s", service.Text(err.Error()))
	}
	return ref, nil
}

// state answers <prefix>.ctl.state.<kind>: the state document as JSON, its
// state decoded from msgpack. Any node answers, hosting the kind or not.
func (n *Node) state(kind string, data []byte) ([]byte, error) {
	ref, err := requestRef(kind, data)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(n.runCtx, 30*time.Second)
	defer cancel()
	ent, err := n.states.Get(ctx, n.names.StateKey(ref))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return nil, failf(ErrNotFound, "effector %s not found", ref)
	case errors.Is(err, ErrCorruptState):
		return nil, failf(ErrCorruptState, "%s: %s", cutText(err.Error()), n.repairHint(ref))
	case err != nil:
		return nil, fmt.Errorf("read state of %s: %w", ref, err)
	}
	return renderDocument(ent.Value)
}

// activate answers <prefix>.ctl.activate.<kind> on a node hosting kind: the
// node reading the effector's partition (the lease holder) loads it.
func (n *Node) activate(kind string, data []byte) ([]byte, error) {
	ref, err := requestRef(kind, data)
	if err != nil {
		return nil, err
	}
	p := n.place.Load()
	if p == nil {
		return nil, failf(ErrNotLoaded, "node %s is not placing partitions yet: retry", n.opts.NodeID)
	}
	s := slot{kind, n.names.Partition(ref)}
	p.mu.Lock()
	owner := p.leases[s].node
	p.mu.Unlock()
	switch owner {
	case "":
		return nil, failf(ErrNotLoaded, "partition %d of kind %s has no reader right now (a hand-over): retry shortly", s.num, kind)
	case n.opts.NodeID:
		return n.activateHere(kind, data)
	}
	body, err := n.forward(n.names.NodeControl(owner, opActivate, kind), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, failf(ErrNotLoaded, "node %s, which reads partition %d of kind %s, does not answer (it may be stopping): retry shortly", owner, s.num, kind)
	}
	return body, err
}

// activateHere loads ref's state document into this node, which must read
// its partition, and returns the document as JSON: its next record finds it
// loaded. It stays loaded until idle for Options.IdleTimeout.
func (n *Node) activateHere(kind string, data []byte) ([]byte, error) {
	ref, err := requestRef(kind, data)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(n.runCtx, 30*time.Second)
	defer cancel()
	p := n.place.Load()
	var part *partition
	if p != nil {
		p.readMu.Lock()
		part = p.reading[slot{kind, n.names.Partition(ref)}]
		p.readMu.Unlock()
	}
	if part == nil {
		return nil, failf(ErrNotLoaded, "node %s does not read partition %d of kind %s right now (a hand-over): retry shortly", n.opts.NodeID, n.names.Partition(ref), kind)
	}
	ent, err := n.states.Get(ctx, n.names.StateKey(ref))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return nil, failf(ErrNotFound, "effector %s not found: create it", ref)
	case errors.Is(err, ErrCorruptState):
		return nil, failf(ErrCorruptState, "%s: %s", cutText(err.Error()), n.repairHint(ref))
	case err != nil:
		return nil, fmt.Errorf("read state of %s: %w", ref, err)
	case ent.Value.Status == StatusTerminated:
		return nil, failf(ErrTerminated, "effector %s is terminated", ref)
	}
	e := part.effector(ref)
	if e == nil {
		return nil, failf(ErrNotLoaded, "node %s is stopping or opening partition %d of kind %s again: retry shortly", n.opts.NodeID, n.names.Partition(ref), kind)
	}
	select {
	case <-e.activate():
	case <-ctx.Done():
		return nil, fmt.Errorf("activate %s: %w", ref, ctx.Err())
	}
	return renderDocument(ent.Value)
}

// activate makes the effector load its state document now, as its drain
// goroutine would before its first record, and returns a channel closed
// once it did. An effector already running needs nothing: the channel is
// closed at once.
func (e *effector) activate() <-chan struct{} {
	done := make(chan struct{})
	e.mu.Lock()
	if e.stopped || e.running {
		e.mu.Unlock()
		close(done)
		return done
	}
	// Taking the drain role: records delivered meanwhile are held, and
	// drained by this goroutine once loaded.
	e.running = true
	e.drainers.Add(1)
	e.mu.Unlock()
	go func() {
		e.load()
		close(done)
		e.drain()
	}()
	return done
}

// requestedState is the msgpack of the state a create or reset request
// gives as JSON, or of the kind's initial state when it gives none; a state
// that does not fit the kind is a 400.
func (n *Node) requestedState(kind string, raw json.RawMessage) ([]byte, error) {
	k := n.kinds[kind]
	var state []byte
	var err error
	if len(raw) == 0 || string(raw) == "null" {
		state, err = k.initial()
	} else {
		state, err = k.fromJSON(raw)
	}
	if err != nil {
		return nil, failf(ErrInvalid, "%s", service.Text(err.Error()))
	}
	return state, nil
}

// create writes a new state document and starts driving the effector.
func (n *Node) create(ctx context.Context, kind string, data []byte) (Document, error) {
	var req CreateRequest
	if err := decodeRequest(data, &req, wantState); err != nil {
		return Document{}, err
	}
	ref, err := checkedRef(kind, req.ID)
	if err != nil {
		return Document{}, err
	}
	if err := checkOwner(req.Owner); err != nil {
		return Document{}, err
	}
	state, err := n.requestedState(kind, req.State)
	if err != nil {
		return Document{}, err
	}
	doc := Document{ID: ref.ID, Kind: ref.Kind, Status: StatusIdle, State: state, Updated: time.Now().UTC(), Owner: req.Owner,
		Version: n.kinds[kind].versions.stamp()}
	rev, err := n.states.Create(ctx, n.names.StateKey(ref), doc)
	if errors.Is(err, kv.ErrExists) {
		msg := fmt.Sprintf("effector %s already exists", ref)
		cur, gerr := n.states.Get(ctx, n.names.StateKey(ref))
		switch {
		case gerr == nil:
			msg += fmt.Sprintf(" (status %s)", cur.Value.Status)
		case errors.Is(gerr, ErrCorruptState):
			msg += fmt.Sprintf(", but its %s: %s", cutText(gerr.Error()), n.repairHint(ref))
		}
		return Document{}, failf(ErrExists, "%s", msg)
	}
	if err != nil {
		return Document{}, fmt.Errorf("write state: %w", err)
	}
	_ = rev // passive until its first record wakes it
	n.log.Info("effector created", "effector", ref.String())
	return doc, nil
}

var errAlreadyTerminated = errors.New("already terminated")

// terminate marks the effector TERMINATED and tells the node that has it
// loaded; records that reach it from then on go to dead letters.
// Terminating a terminated effector returns its document.
func (n *Node) terminate(ctx context.Context, kind string, data []byte) (Document, error) {
	ref, err := requestRef(kind, data)
	if err != nil {
		return Document{}, err
	}
	key := n.names.StateKey(ref)
	ent, err := n.states.Modify(ctx, key, func(d Document) (Document, error) {
		if d.Status == StatusTerminated {
			return d, errAlreadyTerminated
		}
		d.Status, d.Error, d.Updated = StatusTerminated, "", time.Now().UTC()
		return d, nil
	})
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return Document{}, failf(ErrNotFound, "effector %s not found", ref)
	case errors.Is(err, ErrStateMismatch):
		// Not this effector's document: never acted on, even to terminate.
		return Document{}, failf(ErrCorruptState, "%s: %s", cutText(err.Error()), n.repairHint(ref))
	case errors.Is(err, ErrCorruptState):
		// Undecodable: replaced by a valid TERMINATED document.
		doc, err := n.rewrite(ctx, ref, StatusTerminated, nil, true)
		if err != nil {
			return Document{}, err
		}
		n.retireNotice(ref)
		n.interruptRun(ctx, ref)
		if err := n.dropTimers(ctx, ref); err != nil {
			return Document{}, err
		}
		if err := n.announceEnd(ctx, ref); err != nil {
			return Document{}, err
		}
		n.log.Warn("effector with a corrupt state document terminated", "effector", ref.String(), "seq", doc.Seq)
		return doc, nil
	case errors.Is(err, errAlreadyTerminated):
		if ent, err = n.states.Get(ctx, key); err != nil {
			return Document{}, fmt.Errorf("read state: %w", err)
		}
	case err != nil:
		return Document{}, fmt.Errorf("write state: %w", err)
	}
	n.retireNotice(ref)
	n.interruptRun(ctx, ref) // nothing it runs publishes after the end record
	if err := n.dropTimers(ctx, ref); err != nil {
		return Document{}, err
	}
	if err := n.announceEnd(ctx, ref); err != nil {
		return Document{}, err
	}
	n.log.Info("effector terminated", "effector", ref.String())
	return ent.Value, nil
}

// retireNotice tells the nodes hosting ref's kind that it was terminated:
// the one that has it loaded reads its state document again before its next
// record (which then goes to dead letters). Without the notice, its next
// state write would find out too, one record later.
func (n *Node) retireNotice(ref records.Ref) {
	_ = n.conn.NATS().Publish(n.names.Control(opRetire, ref.Kind), []byte(ref.ID))
}

// onRetire handles a retire notice.
func (n *Node) onRetire(kind string, id []byte) {
	ref := records.Ref{Kind: kind, ID: string(id)}
	if ref.Validate() != nil {
		return
	}
	if e := n.loaded(ref); e != nil {
		e.stale.Store(true)
	}
}

// repairHint says how to repair the corrupt state document of ref.
func (n *Node) repairHint(ref records.Ref) string {
	return fmt.Sprintf(`reset it with nats req %s '{"id":"%s"}' (or actor.Client.Reset; add "state" to set one), or terminate it`,
		n.names.Control(opReset, ref.Kind), ref.ID)
}

// reset replaces the state document of an existing effector with a valid
// one: IDLE, with the given state or the kind's initial one. See rewrite for
// the cursor it keeps. A terminated effector stays terminated (410).
func (n *Node) reset(ctx context.Context, kind string, data []byte) (Document, error) {
	var req ResetRequest
	if err := decodeRequest(data, &req, wantState); err != nil {
		return Document{}, err
	}
	ref, err := checkedRef(kind, req.ID)
	if err != nil {
		return Document{}, err
	}
	state, err := n.requestedState(kind, req.State)
	if err != nil {
		return Document{}, err
	}
	doc, err := n.rewrite(ctx, ref, StatusIdle, state, false)
	if err != nil {
		return Document{}, err
	}
	n.retireNotice(ref) // the node that has it loaded reads it again
	n.log.Warn("effector state reset", "effector", ref.String(), "seq", doc.Seq)
	return doc, nil
}

// rewrite writes a fresh, valid document for ref with status and state (nil
// for the kind's initial) over the one there, with compare-and-set, and
// returns it. The cursor is kept so that no record already applied is
// applied again: Seq and Ahead of a document that decodes are kept; a
// corrupt one has no readable cursor, so Seq becomes the stream sequence of
// the last record stored in ref's mailbox. Records stored before that are
// taken as applied: those delivered while the document was corrupt are in
// dead letters (reason corrupt_state), to be sent again if wanted. Replaying
// the mailbox from 0 instead would apply its whole history again to the new
// state and emit every output again. A terminated document is refused (410)
// unless terminated is true (terminate keeps it as it is before this).
func (n *Node) rewrite(ctx context.Context, ref records.Ref, status Status, state []byte, terminated bool) (Document, error) {
	if state == nil {
		var err error
		if state, err = n.kinds[ref.Kind].initial(); err != nil {
			return Document{}, err
		}
	}
	key := n.names.StateKey(ref)
	for {
		doc := Document{ID: ref.ID, Kind: ref.Kind, Status: status, State: state, Version: n.kinds[ref.Kind].versions.stamp()}
		var rev uint64
		ent, err := n.states.Get(ctx, key)
		var cs *CorruptStateError
		switch {
		case err == nil:
			if ent.Value.Status == StatusTerminated && !terminated {
				return Document{}, failf(ErrTerminated, "effector %s is terminated: a terminated effector stays terminated; create another id", ref)
			}
			doc.Seq, doc.Ahead, rev = ent.Value.Seq, ent.Value.Ahead, ent.Revision
			doc.Owner = ent.Value.Owner
		case errors.Is(err, kv.ErrNotFound):
			return Document{}, failf(ErrNotFound, "effector %s not found: create it", ref)
		case errors.As(err, &cs):
			seq, err := n.lastMailboxSeq(ctx, ref)
			if err != nil {
				return Document{}, fmt.Errorf("read the last record of %s: %w", ref, err)
			}
			doc.Seq, rev = seq, cs.Revision
		default:
			return Document{}, fmt.Errorf("read state: %w", err)
		}
		doc.Updated = time.Now().UTC()
		_, err = n.states.Update(ctx, key, doc, rev)
		if errors.Is(err, kv.ErrConflict) {
			if ctx.Err() != nil {
				return Document{}, fmt.Errorf("write state: %w", ctx.Err())
			}
			continue // written meanwhile: decide again on what is there
		}
		if err != nil {
			return Document{}, fmt.Errorf("write state: %w", err)
		}
		return doc, nil
	}
}

// lastMailboxSeq returns the stream sequence of the last record stored in
// ref's mailbox, 0 when there is none.
func (n *Node) lastMailboxSeq(ctx context.Context, ref records.Ref) (uint64, error) {
	msg, err := n.streamFor(ref).GetLastMsgForSubject(ctx, n.names.StoredMailbox(ref))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return msg.Sequence, nil
}
