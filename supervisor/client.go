package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/internal/tracectx"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// Client drives orchestrations through the orchestration API
// (<prefix>.orch.*) served by any running supervisor. It is safe for
// concurrent use and holds nothing but the connection.
type Client struct {
	nc    *nats.Conn
	names bus.Names
}

// NewClient returns a client using conn's NATS connection and prefix.
func NewClient(conn *bus.Conn) (*Client, error) {
	if conn == nil || conn.NATS() == nil {
		return nil, invalidf("new client: conn is nil: pass a connected *bus.Conn")
	}
	return &Client{nc: conn.NATS(), names: conn.Names()}, nil
}

// Subject returns the subject of operation op: <prefix>.orch.<op>
// ([bus.Names.Orch]); "" when prefix is not a valid prefix.
func Subject(prefix, op string) string {
	n, err := bus.NewNames(prefix)
	if err != nil {
		return ""
	}
	return n.Orch(op)
}

// Start starts orchestration name with input (any value that encodes as
// JSON; nil for none) and returns its id. It fails with ErrUnknownName when
// no supervisor has a definition by that name, ErrInvalid for a bad input,
// ErrUnavailable when no supervisor runs.
func (c *Client) Start(ctx context.Context, name string, input any) (string, error) {
	return c.StartOwned(ctx, name, input, "")
}

// StartOwned is [Client.Start] of an orchestration that belongs to owner (a
// user or tenant id; empty for none).
func (c *Client) StartOwned(ctx context.Context, name string, input any, owner string) (string, error) {
	if name == "" {
		return "", invalidf("start: empty name: say which orchestration to start, e.g. \"demo\"")
	}
	raw, err := rawJSON(input)
	if err != nil {
		return "", fmt.Errorf("start %s: %w", name, err)
	}
	var rep StartReply
	if err := c.call(ctx, OpStart, StartRequest{Name: name, Input: raw, Owner: owner}, &rep); err != nil {
		return "", fmt.Errorf("start %s: %w", name, err)
	}
	return rep.ID, nil
}

// Status returns orchestration id as it stands: status, step, what it waits
// for, results so far and error. ErrUnknownOrchestration for an unknown id.
func (c *Client) Status(ctx context.Context, id string) (Orchestration, error) {
	var o Orchestration
	if err := c.call(ctx, OpStatus, IDRequest{ID: id}, &o); err != nil {
		return Orchestration{}, fmt.Errorf("status of %s: %w", id, err)
	}
	return o, nil
}

// Input gives input (any value that encodes as JSON) to orchestration id,
// which must be WAITING; it resumes it and returns the status then (usually
// RUNNING, or a final status if it finished at once). ErrNotWaiting when it
// does not wait for input (a second input is one), ErrFinished when it is
// over, ErrUnknownOrchestration for an unknown id.
func (c *Client) Input(ctx context.Context, id string, input any) (Status, error) {
	raw, err := rawJSON(input)
	if err != nil {
		return "", fmt.Errorf("input to %s: %w", id, err)
	}
	var rep OKReply
	if err := c.call(ctx, OpInput, InputRequest{ID: id, Input: raw}, &rep); err != nil {
		return "", fmt.Errorf("input to %s: %w", id, err)
	}
	return rep.Status, nil
}

// Cancel cancels orchestration id and its outstanding tasks (their workers
// get a cancel record). ErrFinished when it is already over,
// ErrUnknownOrchestration for an unknown id.
func (c *Client) Cancel(ctx context.Context, id string) error {
	var rep OKReply
	if err := c.call(ctx, OpCancel, IDRequest{ID: id}, &rep); err != nil {
		return fmt.Errorf("cancel %s: %w", id, err)
	}
	return nil
}

func rawJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if r, ok := v.(json.RawMessage); ok {
		if !json.Valid(r) {
			return nil, invalidf("input is not valid JSON")
		}
		return r, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, invalidf("input %T does not encode as JSON: %v", v, err)
	}
	return b, nil
}

func (c *Client) call(ctx context.Context, op string, req, rep any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return invalidf("encode request: %v", err)
	}
	subject := c.names.Orch(op)
	msg, err := c.nc.RequestMsgWithContext(ctx, c.request(ctx, subject, body))
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: nobody answers %s: start ea-supervisor", ErrUnavailable, subject)
	}
	if err != nil {
		return err
	}
	if se := service.ErrorOf(msg); se != nil {
		return &APIError{Code: se.Code, Reason: se.Reason, Message: se.Message}
	}
	if err := json.Unmarshal(msg.Data, rep); err != nil {
		return fmt.Errorf("decode reply of %s: %w", subject, err)
	}
	return nil
}

// request is the message of an API call: with the span of ctx in its
// traceparent header when ctx has one, so the supervisor's step continues
// the caller's trace.
func (c *Client) request(ctx context.Context, subject string, body []byte) *nats.Msg {
	msg := &nats.Msg{Subject: subject, Data: body}
	if trace.SpanContextFromContext(ctx).IsValid() {
		msg.Header = nats.Header{}
		tracectx.InjectHeader(ctx, msg.Header)
	}
	return msg
}
