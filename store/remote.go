package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/records"
)

// Reader reads the record store. [Client] reads JetStream directly;
// [Remote] asks a [Server] over NATS. Both answer alike, errors included.
type Reader interface {
	Get(ctx context.Context, id string) (Record, error)
	Query(ctx context.Context, q Query) (Page, error)
	Count(ctx context.Context, q Query) (uint64, error)
	Kinds(ctx context.Context) ([]Kind, error)
	Effectors(ctx context.Context, q EffectorQuery) (EffectorPage, error)
	Orchestrations(ctx context.Context, q OrchQuery) (OrchPage, error)
}

var (
	_ Reader = (*Client)(nil)
	_ Reader = (*Remote)(nil)
)

// Remote reads the record store through the store service
// (<prefix>.store.*), for processes that may not read the streams
// themselves. It is safe for concurrent use. Errors answered by the service
// are [*ServiceError]s matching the same sentinels as [Client]'s; no server
// answering is [ErrUnavailable].
type Remote struct {
	nc *nats.Conn
	n  names
}

// NewRemote returns a remote reader on conn.
func NewRemote(conn *bus.Conn) (*Remote, error) {
	if conn == nil {
		return nil, invalidf("NewRemote: conn is nil")
	}
	return &Remote{nc: conn.NATS(), n: newNames(conn.Names())}, nil
}

func (r *Remote) call(ctx context.Context, op string, req, reply any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	msg, err := r.nc.RequestWithContext(ctx, r.n.subject(op), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("store %s: %w: no store server answers %s (ea-node runs one)", op, ErrUnavailable, r.n.subject(op))
	}
	if err != nil {
		return fmt.Errorf("store %s: %w", op, err)
	}
	if se := service.ErrorOf(msg); se != nil {
		kind := cmp.Or(se.Reason, msg.Header.Get(HeaderKind))
		return &ServiceError{Code: se.Code, Kind: kind, Message: se.Message}
	}
	if err := json.Unmarshal(msg.Data, reply); err != nil {
		return fmt.Errorf("store %s: bad reply: %w", op, err)
	}
	return nil
}

// Get is [Client.Get] over NATS.
func (r *Remote) Get(ctx context.Context, id string) (Record, error) {
	var j RecordJSON
	if err := r.call(ctx, OpGet, GetRequest{ID: id}, &j); err != nil {
		return Record{}, err
	}
	return j.Record(), nil
}

// Query is [Client.Query] over NATS.
func (r *Remote) Query(ctx context.Context, q Query) (Page, error) {
	var j PageJSON
	if err := r.call(ctx, OpQuery, requestOf(q), &j); err != nil {
		return Page{}, err
	}
	p := Page{Records: make([]Record, len(j.Records)), Cursor: j.Cursor, More: j.More}
	for i, rec := range j.Records {
		p.Records[i] = rec.Record()
	}
	return p, nil
}

// Count is [Client.Count] over NATS.
func (r *Remote) Count(ctx context.Context, q Query) (uint64, error) {
	q.Order, q.Limit, q.Cursor = OldestFirst, 0, ""
	var j CountJSON
	if err := r.call(ctx, OpCount, requestOf(q), &j); err != nil {
		return 0, err
	}
	return j.Count, nil
}

// Kinds is [Client.Kinds] over NATS.
func (r *Remote) Kinds(ctx context.Context) ([]Kind, error) {
	var j KindsJSON
	if err := r.call(ctx, OpKinds, struct{}{}, &j); err != nil {
		return nil, err
	}
	return j.Kinds, nil
}

// Effectors is [Client.Effectors] over NATS.
func (r *Remote) Effectors(ctx context.Context, q EffectorQuery) (EffectorPage, error) {
	var j EffectorsJSON
	req := EffectorsRequest{Kind: q.Kind, Status: string(q.Status), Owner: q.Owner, Limit: q.Limit, Cursor: q.Cursor}
	if err := r.call(ctx, OpEffectors, req, &j); err != nil {
		return EffectorPage{}, err
	}
	return EffectorPage{Effectors: j.Effectors, Cursor: j.Cursor, More: j.More}, nil
}

// Orchestrations is [Client.Orchestrations] over NATS.
func (r *Remote) Orchestrations(ctx context.Context, q OrchQuery) (OrchPage, error) {
	var j OrchestrationsJSON
	req := OrchestrationsRequest{Status: q.Status, Name: q.Name, Owner: q.Owner, Limit: q.Limit, Cursor: q.Cursor}
	if err := r.call(ctx, OpOrchestrations, req, &j); err != nil {
		return OrchPage{}, err
	}
	return OrchPage{Orchestrations: j.Orchestrations, Cursor: j.Cursor, More: j.More}, nil
}

func requestOf(q Query) QueryRequest {
	req := QueryRequest{Effector: q.Effector.String(), Box: q.Box, Process: q.Process, Owner: q.Owner, Type: q.Type,
		Order: q.Order, Limit: q.Limit, Cursor: q.Cursor}
	if !q.Since.IsZero() {
		req.Since = &q.Since
	}
	if !q.Until.IsZero() {
		req.Until = &q.Until
	}
	return req
}

// Record returns the record j describes.
func (j RecordJSON) Record() Record {
	r := Record{Stream: j.Stream, Box: j.Box, Stored: j.Stored, Invalid: j.Invalid}
	r.Effector, _ = records.ParseRef(j.Effector)
	from, _ := records.ParseRef(j.From)
	r.Record = records.Record{
		ID: j.ID, Type: j.Type, From: from, Process: j.Process, Owner: j.Owner, Cause: j.Cause, Reply: j.Reply,
		Priority: records.Priority(j.Priority), ContentType: j.ContentType, Payload: j.Payload,
		Subject: j.Subject, Stream: j.Stream, Seq: j.Seq,
	}
	if j.Time != nil {
		r.Time = *j.Time
	}
	return r
}
