package actor

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/vmihailenco/msgpack/v5"
)

// Status is an effector's status in its state document.
type Status string

// Statuses.
const (
	// StatusIdle: caught up, waiting for records.
	StatusIdle Status = "IDLE"
	// StatusProcessing: records are waiting behind the last one applied, or
	// the logic has been running on a record for a while.
	StatusProcessing Status = "PROCESSING"
	// StatusError: the last record ended in dead letters; cleared by the next
	// success.
	StatusError Status = "ERROR"
	// StatusTerminated: terminated; final.
	StatusTerminated Status = "TERMINATED"
)

// Document is an effector's state document, the value of key <kind>.<id> in
// the state bucket (a msgpack map readable from any language).
type Document struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Status Status `json:"status"`
	// State is the user state, msgpack-encoded. Use [Document.Decode].
	State msgpack.RawMessage `json:"state"`
	// Seq is the stream sequence of the last record applied; every record of
	// the mailbox at or below it has been applied.
	Seq uint64 `json:"seq"`
	// Ahead lists records above Seq already applied because they were
	// high-priority and overtook waiting ones. Usually empty.
	Ahead   []uint64  `json:"ahead,omitempty"`
	Updated time.Time `json:"updated"`
	// Error is the last failure while Status is ERROR.
	Error string `json:"error,omitempty"`
	// Owner is the user or tenant the effector belongs to, set at create
	// (empty: none).
	Owner string `json:"owner,omitempty"`
	// Version is the version of the kind's state type State was written
	// with ([Kind].Version). 0 means 1: absent from documents written
	// before state versions, and by kinds at version 1 (key "version" is
	// written only above 1). See [Document.StateVersion].
	Version int `json:"version,omitempty"`
}

// StateVersion returns the version of the state type State was written
// with: Version, or 1 when it is 0.
func (d Document) StateVersion() int { return max(d.Version, 1) }

// Ref returns the effector this document belongs to.
func (d Document) Ref() records.Ref { return records.Ref{Kind: d.Kind, ID: d.ID} }

// Decode decodes the user state into v (a pointer to the kind's state type).
func (d Document) Decode(v any) error {
	if err := codec.Unmarshal(d.State, v); err != nil {
		return fmt.Errorf("decode state of %s: %w", d.Ref(), err)
	}
	return nil
}

// applied reports whether the record at stream sequence seq is already
// reflected in this document.
func (d Document) applied(seq uint64) bool {
	return seq <= d.Seq || slices.Contains(d.Ahead, seq)
}

// sameWrite reports whether d is the document written as next: the same
// seq and the same Updated, to the nanosecond (no other writer makes that).
func (d Document) sameWrite(next Document) bool {
	return d.Seq == next.Seq && d.Updated.Equal(next.Updated)
}

// MarshalJSON renders the document as JSON with the state as a JSON object,
// the shape control endpoints answer with.
func (d Document) MarshalJSON() ([]byte, error) {
	var state any
	if len(d.State) > 0 {
		if err := codec.Unmarshal(d.State, &state); err != nil {
			return nil, fmt.Errorf("state of %s: %w", d.Ref(), err)
		}
	}
	type doc Document
	return json.Marshal(struct {
		doc
		State any `json:"state"`
	}{doc(d), state})
}

// UnmarshalJSON reads the JSON form written by MarshalJSON.
func (d *Document) UnmarshalJSON(data []byte) error {
	type doc Document
	var v struct {
		doc
		State json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*d = Document(v.doc)
	d.State = nil
	if len(v.State) > 0 && string(v.State) != "null" {
		b, err := codec.FromJSON(v.State)
		if err != nil {
			return err
		}
		d.State = b
	}
	return nil
}
