package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// QueryRequest is the JSON body of <prefix>.store.query and
// <prefix>.store.count. Every field is optional; see [Query].
type QueryRequest struct {
	Effector string     `json:"effector,omitempty"` // "<kind>/<id>"
	Box      Box        `json:"box,omitempty"`      // "mailbox", "outbox" or absent (both)
	Process  string     `json:"process,omitempty"`
	Owner    string     `json:"owner,omitempty"`
	Type     string     `json:"type,omitempty"`
	Since    *time.Time `json:"since,omitempty"` // RFC 3339
	Until    *time.Time `json:"until,omitempty"`
	Order    Order      `json:"order,omitempty"` // "newest" or absent (oldest first)
	Limit    int        `json:"limit,omitempty"`
	Cursor   string     `json:"cursor,omitempty"`
}

// Query converts the request, checking the effector reference.
func (r QueryRequest) Query() (Query, error) {
	q := Query{Box: r.Box, Process: r.Process, Owner: r.Owner, Type: r.Type, Order: r.Order, Limit: r.Limit, Cursor: r.Cursor}
	if r.Effector != "" {
		ref, err := records.ParseRef(r.Effector)
		if err != nil {
			return Query{}, invalidf("effector: %v", err)
		}
		q.Effector = ref
	}
	if r.Since != nil {
		q.Since = *r.Since
	}
	if r.Until != nil {
		q.Until = *r.Until
	}
	return q, nil
}

// GetRequest is the JSON body of <prefix>.store.get.
type GetRequest struct {
	ID string `json:"id"`
}

// PageJSON is the JSON reply of <prefix>.store.query.
type PageJSON struct {
	Records []RecordJSON `json:"records"`
	Cursor  string       `json:"cursor,omitempty"`
	More    bool         `json:"more"`
}

// CountJSON is the JSON reply of <prefix>.store.count.
type CountJSON struct {
	Count uint64 `json:"count"`
}

// RecordJSON is a record as the store service answers it. Payload is the
// body in base64; JSON is the payload as a JSON value when it is JSON, or
// msgpack that converts to JSON.
type RecordJSON struct {
	ID          string          `json:"id"`
	Type        string          `json:"type,omitempty"`
	From        string          `json:"from,omitempty"`
	Process     string          `json:"process,omitempty"`
	Owner       string          `json:"owner,omitempty"`
	Cause       string          `json:"cause,omitempty"`
	Reply       string          `json:"reply,omitempty"`
	Priority    string          `json:"priority,omitempty"`
	Time        *time.Time      `json:"time,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	Subject     string          `json:"subject"`
	Stream      string          `json:"stream"`
	Seq         uint64          `json:"seq"`
	Box         Box             `json:"box"`
	Effector    string          `json:"effector,omitempty"`
	Stored      time.Time       `json:"stored"`
	Payload     []byte          `json:"payload,omitempty"`
	JSON        json.RawMessage `json:"json,omitempty"`
	Invalid     string          `json:"invalid,omitempty"`
}

// JSON returns the wire form of r.
func (r Record) JSON() RecordJSON {
	j := RecordJSON{
		ID: r.ID, Type: r.Type, From: r.From.String(), Process: r.Process, Owner: r.Owner, Cause: r.Cause,
		Reply: r.Reply, Priority: string(r.Priority), ContentType: r.ContentType,
		Subject: r.Subject, Stream: r.Stream, Seq: r.Seq, Box: r.Box, Effector: r.Effector.String(),
		Stored: r.Stored, Payload: r.Payload, Invalid: r.Invalid,
	}
	if !r.Time.IsZero() {
		t := r.Time
		j.Time = &t
	}
	if len(r.Payload) > 0 && r.Invalid == "" {
		if r.ContentType == records.ContentJSON {
			j.JSON = json.RawMessage(r.Payload)
		} else {
			var v any
			if codec.Unmarshal(r.Payload, &v) == nil {
				if b, err := json.Marshal(v); err == nil {
					j.JSON = b
				}
			}
		}
	}
	return j
}

// decodeStrict decodes one JSON object from data into v, refusing unknown
// fields, trailing data and bodies over 64 KiB. An empty body is {}.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if len(data) > 64<<10 {
		return invalidf("request body of %d bytes: at most 65536", len(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidf("request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidf("request body: %s", "trailing data after the JSON object")
	}
	return nil
}

// DecodeQueryRequest decodes the JSON body of a query or count request
// strictly (unknown fields and trailing data are errors) and validates it.
func DecodeQueryRequest(data []byte) (Query, error) {
	var r QueryRequest
	if err := decodeStrict(data, &r); err != nil {
		return Query{}, err
	}
	q, err := r.Query()
	if err != nil {
		return Query{}, err
	}
	probe := q
	if _, err := probe.validate(-1); err != nil && !errors.Is(err, ErrBadCursor) {
		return Query{}, err
	}
	return q, nil
}
