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

	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Control operations, the <op> of <prefix>.ctl.<op>.<kind>.
const (
	opCreate    = "create"
	opTerminate = "terminate"
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
}

// TerminateRequest is the JSON body of a terminate request.
type TerminateRequest struct {
	ID string `json:"id"`
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

func (n *Node) hostSubject(op, kind string) string {
	return n.names.Prefix() + ".ctl.host." + op + "." + kind
}

func (n *Node) serveControl() (*control, error) {
	c := &control{}
	for _, kind := range n.Kinds() {
		for _, op := range []string{opCreate, opTerminate} {
			sub, err := n.conn.NC.QueueSubscribe(n.hostSubject(op, kind), "ea-hosts", func(m *nats.Msg) {
				body, code, text := n.handleControl(op, kind, m.Data)
				reply := nats.NewMsg(m.Reply)
				reply.Data = body
				if code != 0 {
					reply.Header.Set(headerServiceError, text)
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
		Description: "effectors control: create and terminate effectors",
	})
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("start control service: %w", err)
	}
	c.svc = svc
	for _, op := range []string{opCreate, opTerminate} {
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
	if code != 0 {
		_ = req.Error(strconv.Itoa(code), text, nil)
		return
	}
	_ = req.Respond(body)
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
		return &ControlError{Code: 400, Message: fmt.Sprintf("bad request body: %v (want JSON like {\"id\": \"c1\"})", err)}
	}
	return nil
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
	k := n.kinds[kind]
	var state []byte
	var err error
	if len(req.State) == 0 || string(req.State) == "null" {
		state, err = k.initial()
	} else {
		state, err = k.fromJSON(req.State)
	}
	if err != nil {
		return Document{}, &ControlError{Code: 400, Message: err.Error()}
	}
	doc := Document{ID: ref.ID, Kind: ref.Kind, Status: StatusIdle, State: state, Updated: time.Now().UTC()}
	rev, err := n.states.Create(ctx, n.names.StateKey(ref), doc)
	if errors.Is(err, kv.ErrExists) {
		msg := fmt.Sprintf("effector %s already exists", ref)
		if cur, gerr := n.states.Get(ctx, n.names.StateKey(ref)); gerr == nil {
			msg += fmt.Sprintf(" (status %s)", cur.Value.Status)
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
	case errors.Is(err, errAlreadyTerminated):
		if ent, err = n.states.Get(ctx, key); err != nil {
			return Document{}, fmt.Errorf("read state: %w", err)
		}
	case err != nil:
		return Document{}, fmt.Errorf("write state: %w", err)
	}
	n.retireNotice(ref)
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
