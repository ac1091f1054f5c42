package web

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// The list requests (docs/gateway.md, "Lists"): a page of dead letters or
// orchestrations, filtered and paged by the gateway, read from their
// streams by the record store (store.Client.DeadLetters,
// store.Client.ListOrchestrations). Subscriptions of the dead and
// orchestration topics keep a page live.
const (
	TypeDeadList = "dead.list" // request: a page of dead letters
	TypeOrchList = "orch.list" // request: a page of orchestrations
)

// List page sizes: a dead letter carries its record (up to the record
// size limit), so pages stay small.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
)

// deadListRequest is the body of dead.list.
type deadListRequest struct {
	Type string `json:"type"`
	Req  string `json:"req"`
	// Effector (<kind>/<id>) or Kind selects whose dead letters; neither:
	// all the connection may see.
	Effector string `json:"effector,omitempty"`
	Kind     string `json:"kind,omitempty"`
	// Reason is a reason code (EA-Dead-Reason); Text, a case-insensitive
	// search of the error, reason, record id and type.
	Reason string `json:"reason,omitempty"`
	Text   string `json:"text,omitempty"`
	// Owner (admins): only this owner's; a user's is always its own.
	Owner  string    `json:"owner,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Until  time.Time `json:"until,omitzero"`
	Order  string    `json:"order,omitempty"`
	Limit  int       `json:"limit,omitempty"`
	Cursor string    `json:"cursor,omitempty"`
}

// orchListRequest is the body of orch.list.
type orchListRequest struct {
	Type   string    `json:"type"`
	Req    string    `json:"req"`
	Status string    `json:"status,omitempty"`
	Name   string    `json:"name,omitempty"`
	Search string    `json:"search,omitempty"`
	Owner  string    `json:"owner,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Until  time.Time `json:"until,omitzero"`
	Order  string    `json:"order,omitempty"`
	Limit  int       `json:"limit,omitempty"`
	Cursor string    `json:"cursor,omitempty"`
}

// DeadListResult is the result of dead.list.
type DeadListResult struct {
	Dead []DeadLetter `json:"dead"`
	// Cursor continues after this page (empty newest first once the
	// beginning is reached); More says whether more may match.
	Cursor string `json:"cursor"`
	More   bool   `json:"more"`
}

// OrchListResult is the result of orch.list.
type OrchListResult struct {
	Orchestrations []store.Orchestration `json:"orchestrations"`
	Cursor         string                `json:"cursor"`
	More           bool                  `json:"more"`
}

// listLimit checks a list's page size: 0 is [DefaultListLimit].
func listLimit(typ string, limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultListLimit, nil
	case limit < 0 || limit > MaxListLimit:
		return 0, fmt.Errorf("%s frame: limit %d: must be 1 to %d (0 or absent: %d)", typ, limit, MaxListLimit, DefaultListLimit)
	}
	return limit, nil
}

// listOrder checks a list's order: "newest" or empty (oldest first).
func listOrder(typ, order string) (store.Order, error) {
	switch store.Order(order) {
	case store.OldestFirst, store.NewestFirst:
		return store.Order(order), nil
	}
	return "", fmt.Errorf("%s frame: order %q: must be \"newest\" or absent (oldest first)", typ, truncate(order, 64))
}

// listPage checks what every list request has, its page size, order and
// owner (listLimit, listOrder, listOwner), and returns the error code with
// an error.
func (s *session) listPage(typ string, limit int, order, owner string) (int, store.Order, string, string, error) {
	n, err := listLimit(typ, limit)
	if err != nil {
		return 0, "", "", CodeBadRequest, err
	}
	o, err := listOrder(typ, order)
	if err != nil {
		return 0, "", "", CodeBadRequest, err
	}
	who, code, err := s.listOwner(owner)
	if err != nil {
		return 0, "", "", code, err
	}
	return n, o, who, "", nil
}

// listAnswer answers dead.list and orch.list.
func (s *session) listAnswer(ctx context.Context, h head, data []byte) (any, string, error) {
	switch h.Type {
	case TypeDeadList:
		var f deadListRequest
		if err := decodeStrict(data, &f); err != nil {
			return nil, CodeBadRequest, fmt.Errorf("dead.list frame: %w", err)
		}
		q := store.DeadQuery{Kind: f.Kind, Reason: f.Reason, Text: f.Text, Since: f.Since, Until: f.Until, Cursor: f.Cursor}
		if f.Effector != "" {
			if f.Kind != "" {
				return nil, CodeBadRequest, fmt.Errorf("dead.list frame: give \"effector\" or \"kind\", not both")
			}
			r, err := records.ParseRef(f.Effector)
			if err != nil {
				return nil, CodeBadRequest, fmt.Errorf("dead.list frame: effector: %w (want \"<kind>/<id>\")", err)
			}
			q.Kind, q.ID = r.Kind, r.ID
			// Another user's effector is forbidden, as its dead subscription
			// is; one that is gone may still have dead letters of the
			// connection's own records (no_effector, terminated).
			if !s.identity().Admin() {
				if _, code, err := s.ownEffector(ctx, r); err != nil && !errors.Is(err, actor.ErrNotFound) {
					return nil, code, fmt.Errorf("dead.list: %w", err)
				}
			}
		}
		var code string
		var err error
		if q.Limit, q.Order, q.Owner, code, err = s.listPage(h.Type, f.Limit, f.Order, f.Owner); err != nil {
			return nil, code, err
		}
		page, err := s.g.store.DeadLetters(ctx, q)
		if err != nil {
			return nil, "", fmt.Errorf("dead.list: %w", err)
		}
		res := DeadListResult{Dead: make([]DeadLetter, 0, len(page.DeadLetters)), Cursor: page.Cursor, More: page.More}
		for _, d := range page.DeadLetters {
			res.Dead = append(res.Dead, s.g.deadLetterJSON(d.Subject, d.Header, d.Data, d.Seq, d.Stored))
		}
		return res, "", nil
	case TypeOrchList:
		var f orchListRequest
		if err := decodeStrict(data, &f); err != nil {
			return nil, CodeBadRequest, fmt.Errorf("orch.list frame: %w", err)
		}
		q := store.OrchListQuery{Status: f.Status, Name: f.Name, Search: f.Search, Since: f.Since, Until: f.Until, Cursor: f.Cursor}
		var code string
		var err error
		if q.Limit, q.Order, q.Owner, code, err = s.listPage(h.Type, f.Limit, f.Order, f.Owner); err != nil {
			return nil, code, err
		}
		page, err := s.g.store.ListOrchestrations(ctx, q)
		if err != nil {
			return nil, "", fmt.Errorf("orch.list: %w", err)
		}
		res := OrchListResult{Orchestrations: page.Orchestrations, Cursor: page.Cursor, More: page.More}
		if res.Orchestrations == nil {
			res.Orchestrations = []store.Orchestration{}
		}
		return res, "", nil
	}
	return nil, CodeUnknownType, fmt.Errorf("unknown frame type %q", truncate(h.Type, 64))
}

// deadLetterJSON is a dead letter as dead frames and dead.list show it,
// from the dead-letter stream's message at seq (subject
// <prefix>.dead.<kind>.<id>).
func (g *Gateway) deadLetterJSON(subject string, h nats.Header, data []byte, seq uint64, stored time.Time) DeadLetter {
	f := DeadLetter{
		Seq: seq, Stored: stored, Reason: h.Get(records.HeaderDeadReason), Error: h.Get(records.HeaderError),
		MailboxStream: h.Get(records.HeaderStream), Truncated: h.Get(records.HeaderTruncated),
	}
	f.MailboxSeq, _ = strconv.ParseUint(h.Get(records.HeaderSeq), 10, 64)
	ref, refOK := g.names.RefOf(subject)
	if refOK {
		f.Effector = ref.String()
	}
	recSubject := h.Get(records.HeaderSubject)
	var rec records.Record
	var err error
	if strings.Contains(f.Truncated, records.TruncatedPayload) {
		rec, err = records.FromMsg(recSubject, h, nil)
		rec.Payload = data
	} else {
		rec, err = records.FromMsg(recSubject, h, data)
	}
	r := store.Record{Record: rec, Stream: f.MailboxStream, Box: store.BoxMailbox, Stored: f.Stored}
	if err != nil {
		r.Record = records.Record{ID: h.Get(records.HeaderID), Payload: data}
		r.Invalid = err.Error()
	}
	// The dead letter's id is records.DeadID of the record's.
	f.ID = r.ID
	if orig, ok := strings.CutPrefix(r.ID, "dead:"); ok && records.DeadID(orig) == r.ID {
		r.ID = orig
	}
	r.Subject, r.Seq = recSubject, f.MailboxSeq
	if refOK {
		r.Effector = ref
	}
	f.Record = r.JSON()
	return f
}
