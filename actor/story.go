package actor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/effectors/effectors/records"
)

// The log tells the whole story: besides the records logic emits, the
// runtime writes two kinds of records to an effector's outbox
// (<prefix>.out.<kind>.<id>), so that the record log alone says what
// happened to it.
//
//   - [TypeState], when the kind sets [Kind.StateRecords]: after every state
//     write that applies records, the new state document as JSON
//     (Content-Type application/json; the shape [Document.MarshalJSON]
//     gives, with seq), caused by the last record the write applied and in
//     that record's process. Its id is state:<kind>/<id>:<seq> (hashed when
//     too long), seq being the highest mailbox sequence the write applied,
//     so a re-emission after a crash is dropped by the duplicate window.
//   - [TypeEnd], when the effector is terminated: the TERMINATED document as
//     JSON, the last record of its outbox. [Client.Subscribe] ends cleanly
//     on it.
//
// The outbox is where these go (rather than a subject of their own) so that
// one subject, in one order, holds an effector's outputs and its
// transitions: Subscribe, the record store's effector and process queries
// and any core NATS subscriber of the outbox see them without asking for
// anything else. Logic may not emit records of these two types on its own
// outbox (a permanent error): a subscriber can trust them.
//
// Effectively once: the state record is published after the state write
// and before the records are acknowledged. A crash in between leaves them
// unacknowledged; their redelivery is skipped as applied, and the skip of
// the record at the document's highest applied sequence publishes the
// state record again with the same id (dropped by the duplicate window if
// the first got through). A redelivery later than the window (2 minutes by
// default) can repeat a state record; it carries the same seq.

// Record types the runtime writes to an effector's outbox.
const (
	// TypeState is a state-transition record (see [Kind.StateRecords]).
	TypeState = "state"
	// TypeEnd is the last record of a terminated effector's outbox.
	TypeEnd = "end"
)

// checkOwner refuses an owner that breaks the EA-Owner rule (empty is
// none).
func checkOwner(owner string) error {
	if owner == "" {
		return nil
	}
	if err := records.ValidateOwner(owner); err != nil {
		return &ControlError{Code: 400, Reason: reasonInvalid, Message: err.Error()}
	}
	return nil
}

// reservedType reports whether logic may not emit a record of type typ on
// subject: the runtime's own record types on the effector's own outbox.
func reservedType(self records.Ref, subject, typ string, outbox string) error {
	if subject == outbox && (typ == TypeState || typ == TypeEnd) {
		return Permanent(fmt.Errorf("%w: record type %q on the outbox of %s is reserved for the runtime (state transitions and the end record): choose another type", ErrInvalid, typ, self))
	}
	return nil
}

// runtimeID is the record id of a record the runtime writes: the parts
// joined by ':', replaced by a hash when too long for an id.
func runtimeID(parts ...string) string {
	id := ""
	for i, p := range parts {
		if i > 0 {
			id += ":"
		}
		id += p
	}
	if len(id) > records.MaxIDLen {
		sum := sha256.Sum256([]byte(id))
		id = parts[0] + ":h" + hex.EncodeToString(sum[:16])
	}
	return id
}

// highestApplied is the highest mailbox sequence doc reflects.
func highestApplied(doc Document) uint64 {
	h := doc.Seq
	if len(doc.Ahead) > 0 {
		h = max(h, slices.Max(doc.Ahead))
	}
	return h
}

// stateRecord is the state record of doc, caused by cause.
func stateRecord(doc Document, cause records.Record, now time.Time) (records.Record, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return records.Record{}, err
	}
	ref := doc.Ref()
	return records.Record{
		ID:          runtimeID(TypeState, ref.String(), strconv.FormatUint(highestApplied(doc), 10)),
		Type:        TypeState,
		From:        ref,
		Process:     cause.Process,
		Owner:       doc.Owner,
		Cause:       cause.ID,
		Time:        now,
		ContentType: records.ContentJSON,
		Payload:     body,
	}, nil
}

// emitState publishes the state record of the document just written, caused
// by cause, when the kind asks for state records. It reports false when the
// effector must stop before acknowledging (it is stopping): the records stay
// unacknowledged and their redelivery publishes it again ([effector.restate]).
// A state record that can never be published (too large for the server) is
// logged and skipped: the state write stands.
func (e *effector) emitState(cause delivery) bool {
	if !e.kind.stateRecords {
		return true
	}
	rec, err := stateRecord(e.doc, cause.rec, time.Now().UTC())
	if err != nil {
		e.logger().Error("state record not written: the document does not encode", "err", err)
		return true
	}
	o := output{subject: e.node.names.Outbox(e.ref), rec: rec, stream: true}
	if err := e.retryIO(func() error { return e.publish([]output{o}) }); err != nil {
		if errors.Is(err, errAbandon) {
			return false
		}
		e.logger().Error("state record not written", "seq", highestApplied(e.doc), "err", err)
	}
	return true
}

// restate publishes again the state record of the current document when d,
// a redelivered record already applied, is the one at its highest applied
// sequence: the state record of that write may have been lost to a crash
// between the write and the acknowledgement. The id is the same, so a record
// already published is dropped by the duplicate window. It reports false
// when the effector is stopping before it could: d must stay
// unacknowledged.
func (e *effector) restate(d delivery) bool {
	if !e.kind.stateRecords || d.seq != highestApplied(e.doc) || e.doc.Status == StatusTerminated {
		return true
	}
	return e.emitState(d)
}

// endRecord is the end record of a terminated effector's document.
func endRecord(doc Document, rev uint64, now time.Time) (records.Record, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return records.Record{}, err
	}
	ref := doc.Ref()
	return records.Record{
		ID:          runtimeID(TypeEnd, ref.String(), strconv.FormatUint(rev, 10)),
		Type:        TypeEnd,
		From:        ref,
		Owner:       doc.Owner,
		Time:        now,
		ContentType: records.ContentJSON,
		Payload:     body,
	}, nil
}

// publishEnd writes the end record of ref, terminated by the state write at
// revision rev, to its outbox. The id is derived from the revision, so a
// terminate request answered twice (a retry) writes it once.
func (n *Node) publishEnd(ctx context.Context, doc Document, rev uint64) error {
	rec, err := endRecord(doc, rev, time.Now().UTC())
	if err != nil {
		return err
	}
	subject := n.names.Outbox(doc.Ref())
	if _, err := n.js.PublishMsg(ctx, rec.Msg(subject)); err != nil {
		return fmt.Errorf("publish end record to %s: %w", subject, err)
	}
	return nil
}

// untilEnd ends the records of one effector's outbox with its end record
// (from the effector itself), which it yields last: the effector was
// terminated and writes nothing more.
func untilEnd(ref records.Ref, recs iter.Seq2[records.Record, error]) iter.Seq2[records.Record, error] {
	return func(yield func(records.Record, error) bool) {
		for rec, err := range recs {
			if !yield(rec, err) || (err == nil && rec.Type == TypeEnd && rec.From == ref) {
				return
			}
		}
	}
}

// announceEnd writes the end record of ref, just terminated, reading its
// document for the revision of the write that terminated it.
func (n *Node) announceEnd(ctx context.Context, ref records.Ref) error {
	ent, err := n.states.Get(ctx, n.names.StateKey(ref))
	if err != nil {
		return fmt.Errorf("end record of %s: read state: %w", ref, err)
	}
	if ent.Value.Status != StatusTerminated {
		return nil
	}
	return n.publishEnd(ctx, ent.Value, ent.Revision)
}
