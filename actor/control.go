package actor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	// opRetire is not an endpoint: nodes hosting a kind are told on
	// <prefix>.ctl.retire.<kind> that one of its effectors was terminated.
	opRetire = "retire"
)

// Error headers of NATS micro services, used by every control reply.
const (
	headerServiceError     = "Nats-Service-Error"
	headerServiceErrorCode = "Nats-Service-Error-Code"
)

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

// control is the node's control plane: the public micro service endpoints
// <prefix>.ctl.<op>.* answered by any node, and the internal subjects
// <prefix>.ctl.host.<op>.<kind> answered by the nodes hosting <kind>. A public
// request for a kind this node does not host is forwarded to the internal
// subject; no responder there means no node hosts the kind (503).
type control struct {
	svc  micro.Service
	subs []*nats.Subscription
}

func (c *control) stop() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
	if c.svc != nil {
		_ = c.svc.Stop()
	}
}

// controlOps are the public control operations.
var controlOps = []string{opCreate, opTerminate, opReset}

func (n *Node) hostSubject(op, kind string) string {
	return n.names.Prefix() + ".ctl.host." + op + "." + kind
}

func (n *Node) serveControl() (*control, error) {
	c := &control{}
	for _, kind := range n.Kinds() {
		for _, op := range controlOps {
			sub, err := n.conn.NC.QueueSubscribe(n.hostSubject(op, kind), "ea-hosts", func(m *nats.Msg) {
				body, code, text := n.handleControl(op, kind, m.Data)
				reply := nats.NewMsg(m.Reply)
				reply.Data = body
				if code != 0 {
					reply.Header.Set(headerServiceError, capText(text))
					reply.Header.Set(headerServiceErrorCode, strconv.Itoa(code))
				}
				_ = m.RespondMsg(reply)
			})
			if err != nil {
				c.stop()
				return nil, fmt.Errorf("subscribe control of kind %s: %w", kind, err)
			}
			c.subs = append(c.subs, sub)
		}
		sub, err := n.conn.NC.Subscribe(n.names.Control(opRetire, kind), func(m *nats.Msg) { n.onRetire(kind, m.Data) })
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("subscribe retire notices of kind %s: %w", kind, err)
		}
		c.subs = append(c.subs, sub)
	}
	svc, err := micro.AddService(n.conn.NC, micro.Config{
		Name:        n.names.Service(),
		Version:     "0.1.0",
		Description: "effectors control: create, terminate and reset effectors",
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

// servePublic answers <prefix>.ctl.<op>.<kind>, locally when this node hosts
// the kind, else through a node that does.
func (n *Node) servePublic(op string, req micro.Request) {
	kind := req.Subject()[strings.LastIndexByte(req.Subject(), '.')+1:]
	n.mu.Lock()
	_, local := n.kinds[kind]
	n.mu.Unlock()
	if local {
		body, code, text := n.handleControl(op, kind, req.Data())
		respond(req, body, code, text)
		return
	}
	if err := records.ValidateKind(kind); err != nil {
		respond(req, nil, 400, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(n.runCtx, 10*time.Second)
	defer cancel()
	msg, err := n.conn.NC.RequestWithContext(ctx, n.hostSubject(op, kind), req.Data())
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		respond(req, nil, 503, fmt.Sprintf("no node hosts kind %q: start a node that hosts it", kind))
		return
	case err != nil:
		respond(req, nil, 500, fmt.Sprintf("forward %s of kind %q: %v", op, kind, err))
		return
	}
	if codeText := msg.Header.Get(headerServiceErrorCode); codeText != "" {
		code, _ := strconv.Atoi(codeText)
		respond(req, nil, code, msg.Header.Get(headerServiceError))
		return
	}
	respond(req, msg.Data, 0, "")
}

func respond(req micro.Request, body []byte, code int, text string) {
	if code == 0 {
		if err := req.Respond(body); err == nil {
			return
		}
		code, text = 500, "the reply does not fit in a NATS message"
	}
	if req.Error(strconv.Itoa(code), capText(text), nil) != nil {
		_ = req.Error(strconv.Itoa(code), fmt.Sprintf("control request failed (code %d)", code), nil) // always reply
	}
}

// maxControlErrorText bounds the error text of a control reply, so that it always
// fits in a NATS header whatever a request echoes.
const maxControlErrorText = 1024

// capText cuts an error text to maxControlErrorText bytes, on a rune boundary.
func capText(s string) string {
	if len(s) <= maxControlErrorText {
		return s
	}
	n := maxControlErrorText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// handleControl runs a control operation for a hosted kind and returns the
// JSON reply, or an error code and text.
func (n *Node) handleControl(op, kind string, data []byte) (body []byte, code int, text string) {
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
	default:
		err = invalidf("unknown control operation %q", op)
	}
	if err != nil {
		var ce *ControlError
		if errors.As(err, &ce) {
			return nil, ce.Code, ce.Message
		}
		return nil, 500, err.Error()
	}
	body, err = json.Marshal(doc)
	if err != nil {
		return nil, 500, fmt.Sprintf("encode state document: %v", err)
	}
	return body, 0, ""
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &ControlError{Code: 400, Message: fmt.Sprintf("bad request body: %s (want JSON like {\"id\": \"c1\"})", cutText(err.Error()))}
	}
	return nil
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
		return nil, &ControlError{Code: 400, Message: err.Error()}
	}
	return state, nil
}

// create writes a new state document and starts driving the effector.
func (n *Node) create(ctx context.Context, kind string, data []byte) (Document, error) {
	var req CreateRequest
	if err := decodeStrict(data, &req); err != nil {
		return Document{}, err
	}
	ref := records.Ref{Kind: kind, ID: req.ID}
	if err := ref.Validate(); err != nil {
		return Document{}, &ControlError{Code: 400, Message: err.Error()}
	}
	if err := checkOwner(req.Owner); err != nil {
		return Document{}, err
	}
	state, err := n.requestedState(kind, req.State)
	if err != nil {
		return Document{}, err
	}
	doc := Document{ID: ref.ID, Kind: ref.Kind, Status: StatusIdle, State: state, Updated: time.Now().UTC(), Owner: req.Owner}
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
		return Document{}, &ControlError{Code: 409, Message: msg}
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
	var req TerminateRequest
	if err := decodeStrict(data, &req); err != nil {
		return Document{}, err
	}
	ref := records.Ref{Kind: kind, ID: req.ID}
	if err := ref.Validate(); err != nil {
		return Document{}, &ControlError{Code: 400, Message: err.Error()}
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
		return Document{}, &ControlError{Code: 404, Message: fmt.Sprintf("effector %s not found", ref)}
	case errors.Is(err, ErrStateMismatch):
		// Not this effector's document: never acted on, even to terminate.
		return Document{}, &ControlError{Code: 409, Message: fmt.Sprintf("%s: %s", cutText(err.Error()), n.repairHint(ref))}
	case errors.Is(err, ErrCorruptState):
		// Undecodable: replaced by a valid TERMINATED document.
		doc, err := n.rewrite(ctx, ref, StatusTerminated, nil, true)
		if err != nil {
			return Document{}, err
		}
		n.retireNotice(ref)
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
	_ = n.conn.NC.Publish(n.names.Control(opRetire, ref.Kind), []byte(ref.ID))
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
	if err := decodeStrict(data, &req); err != nil {
		return Document{}, err
	}
	ref := records.Ref{Kind: kind, ID: req.ID}
	if err := ref.Validate(); err != nil {
		return Document{}, &ControlError{Code: 400, Message: err.Error()}
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
		doc := Document{ID: ref.ID, Kind: ref.Kind, Status: status, State: state}
		var rev uint64
		ent, err := n.states.Get(ctx, key)
		var cs *CorruptStateError
		switch {
		case err == nil:
			if ent.Value.Status == StatusTerminated && !terminated {
				return Document{}, &ControlError{Code: 410, Message: fmt.Sprintf("effector %s is terminated: a terminated effector stays terminated; create another id", ref)}
			}
			doc.Seq, doc.Ahead, rev = ent.Value.Seq, ent.Value.Ahead, ent.Revision
			doc.Owner = ent.Value.Owner
		case errors.Is(err, kv.ErrNotFound):
			return Document{}, &ControlError{Code: 404, Message: fmt.Sprintf("effector %s not found: create it", ref)}
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
	msg, err := n.stream.GetLastMsgForSubject(ctx, n.names.StoredMailbox(ref))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return msg.Sequence, nil
}
