package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/tracing"
	"go.opentelemetry.io/otel/trace"
)

// handleSend stores a record in a mailbox and acknowledges it only on
// JetStream's own answer for that record (DESIGN.md, "An acknowledgement
// means stored"; docs/gateway.md):
//
//   - a PubAck that is not a duplicate: the record is stored now, at the
//     PubAck's sequence;
//   - a PubAck that is a duplicate: the stream holds a message with this id
//     at the PubAck's sequence, on some subject. The gateway reads it from
//     the stream's leader and acknowledges a duplicate only when it is this
//     record (this mailbox, type and payload); otherwise the id belongs to
//     another record and the send is refused with conflict.
//
// Before publishing, a client-chosen id is looked up in the record store,
// which finds re-sends made after the duplicate window. A hit is a record
// read from the stream, so it is trusted the same way; a miss proves
// nothing (the index lags the stream), and the publish decides.
func (s *session) handleSend(h head, f SendFrame) {
	ctx, cancel := context.WithTimeout(s.ctx, s.g.cfg.RequestTimeout)
	defer cancel()
	refuse := func(code, msg string) {
		s.g.metrics.sends.WithLabelValues("refused").Inc()
		s.errorFrame(h, code, msg)
	}
	ref, err := records.ParseRef(f.To)
	if err != nil {
		refuse(CodeBadRequest, fmt.Sprintf("to: %v (want \"<kind>/<id>\", each [A-Za-z0-9_-]{1,128})", err))
		return
	}
	in := f.Record
	rec := records.Record{
		ID: in.ID, Type: in.Type, Process: in.Process, Cause: in.Cause,
		Priority: records.Priority(in.Priority), ContentType: records.ContentJSON,
		TraceParent: in.TraceParent, TraceState: in.TraceState,
	}
	if len(in.Payload) > 0 && string(in.Payload) != "null" {
		rec.Payload = in.Payload
	}
	if in.Time != nil {
		rec.Time = *in.Time
	} else {
		rec.Time = time.Now().UTC()
	}
	given := rec.ID != ""
	if !given {
		rec.ID = records.NewID()
	}
	if rec.Type == "" {
		rec.Type = records.DefaultType
	}
	stream := s.g.names.MailboxStreamFor(ref) // with stream groups, ref's group's
	ack := func(seq uint64, duplicate bool) {
		outcome := "stored"
		if duplicate {
			outcome = "duplicate"
		}
		s.g.metrics.sends.WithLabelValues(outcome).Inc()
		_ = s.send(TypeAck, AckFrame{Type: TypeAck, Req: h.Req, ID: rec.ID, Stream: stream, Seq: seq, Duplicate: duplicate})
	}
	if err := rec.Validate(); err != nil {
		refuse(CodeBadRequest, fmt.Sprintf("record: %v", err))
		return
	}
	owner, code, err := s.ownerFor(in.Owner)
	if err != nil {
		refuse(code, err.Error())
		return
	}
	rec.Owner = owner
	doc, code, err := s.ownEffector(ctx, ref)
	if err != nil {
		refuse(code, err.Error())
		return
	}
	if doc.Status == actor.StatusTerminated {
		refuse(CodeTerminated, fmt.Sprintf("send to %s: %v", ref, actor.ErrTerminated))
		return
	}
	if !f.AnyType {
		if types, ok := s.g.kinds.accepts(ctx, s.g.actors, ref.Kind, rec.Type); !ok {
			refuse(CodeUndeclaredType, fmt.Sprintf("send to %s: kind %s handles record types %s, not %q: nothing was stored; set record.type (e.g. %q), or send anyway with \"any_type\": true",
				ref, ref.Kind, strings.Join(types, ", "), rec.Type, types[0]))
			return
		}
	}
	if given {
		prev, err := s.g.store.Get(ctx, rec.ID)
		switch {
		case err == nil:
			if prev.Stream != stream || prev.Box != store.BoxMailbox || prev.Invalid != "" || prev.Effector != ref || !sameRecord(prev.Record, rec) {
				refuse(CodeConflict, conflictText(rec.ID, ref, prev.Effector, string(prev.Box)))
				return
			}
			ack(prev.Seq, true)
			return
		case errors.Is(err, store.ErrNotFound):
			// The index may lag the stream: the publish below decides.
		default:
			// Without the store's answer the duplicate window still
			// protects a re-send made within it.
			s.log.Warn("gateway: record store unavailable, relying on the duplicate window", "id", rec.ID, "err", err)
		}
	}
	if t := s.g.cfg.Tracer; t != nil {
		var span trace.Span
		ctx, span = t.Start(ctx, "gateway send", trace.SpanKindProducer, rec, tracing.RecordAttributes(rec)...)
		defer span.End()
		tracing.Inject(ctx, &rec)
	}
	pa, err := s.g.conn.JetStream().PublishMsg(ctx, rec.Msg(s.g.names.Mailbox(ref)))
	if err != nil {
		s.g.metrics.sends.WithLabelValues("failed").Inc()
		s.errorFrame(h, CodeUnavailable, fmt.Sprintf("send to %s: not stored: %v (send it again with the same id)", ref, err))
		return
	}
	if !pa.Duplicate {
		ack(pa.Sequence, false)
		return
	}
	// JetStream dropped the publish: it holds a message with this id at
	// pa.Sequence, maybe another effector's. Read it to know whose.
	orig, err := s.g.storedAt(ctx, stream, pa.Sequence)
	switch {
	case errors.Is(err, bus.ErrNoMessage):
		refuse(CodeConflict, fmt.Sprintf("record id %q is already used by the record at seq %d of %s, which the stream no longer holds (so whose it was cannot be told): choose another id", rec.ID, pa.Sequence, stream))
		return
	case err != nil:
		s.g.metrics.sends.WithLabelValues("failed").Inc()
		s.errorFrame(h, CodeUnavailable, fmt.Sprintf("send to %s: not stored: the stream holds record id %q at seq %d and reading it failed: %v (send it again with the same id)", ref, rec.ID, pa.Sequence, err))
		return
	}
	if orig.Header.Get(records.HeaderID) != rec.ID {
		// JetStream's duplicate answer named a message of another id:
		// nothing can be concluded, and nothing was stored.
		s.g.metrics.sends.WithLabelValues("failed").Inc()
		s.log.Error("gateway: duplicate publish answered with a message of another id", "id", rec.ID, "seq", pa.Sequence, "stored_id", orig.Header.Get(records.HeaderID))
		s.errorFrame(h, CodeUnavailable, fmt.Sprintf("send to %s: not stored: JetStream called record id %q a duplicate of seq %d, which holds another id (send it again with the same id)", ref, rec.ID, pa.Sequence))
		return
	}
	if orig.Subject != s.g.names.StoredMailbox(ref) {
		// Another mailbox, or this one's subject with a partition token
		// that is not its own (published as stored, never read).
		owner, _, ok := s.g.names.StoredMailboxOf(orig.Subject)
		if !ok || owner == ref {
			refuse(CodeConflict, fmt.Sprintf("record id %q is already used by a message on %s: choose another id", rec.ID, orig.Subject))
			return
		}
		refuse(CodeConflict, conflictText(rec.ID, ref, owner, string(store.BoxMailbox)))
		return
	}
	prev, err := records.FromMsg(s.g.names.Mailbox(ref), orig.Header, orig.Data)
	if err != nil || !sameRecord(prev, rec) {
		refuse(CodeConflict, conflictText(rec.ID, ref, ref, string(store.BoxMailbox)))
		return
	}
	ack(pa.Sequence, true)
}

// conflictText says that record id, sent to ref, is taken by a record of
// owner's box.
func conflictText(id string, ref, owner records.Ref, box string) string {
	if owner == ref && box == string(store.BoxMailbox) {
		return fmt.Sprintf("record id %q is already used by another record of %s (%s; another type or payload): choose another id", id, owner, box)
	}
	return fmt.Sprintf("record id %q is already used by a record of %s (%s): choose another id", id, owner, box)
}

// sameRecord tells whether stored, the record the stream holds with rec's
// id, is rec sent again: the same type, content type and payload (JSON
// payloads compared as values, so spacing and key order do not matter).
// The time, process, cause and priority are not compared: a client re-sends
// what it could not confirm, and the gateway sets the time when it is absent.
func sameRecord(stored, rec records.Record) bool {
	if stored.Type != rec.Type || stored.ContentType != rec.ContentType {
		return false
	}
	if bytes.Equal(stored.Payload, rec.Payload) {
		return true
	}
	if rec.ContentType != records.ContentJSON {
		return false
	}
	a, errA := decodeJSONValue(stored.Payload)
	b, errB := decodeJSONValue(rec.Payload)
	return errA == nil && errB == nil && reflect.DeepEqual(a, b)
}

// decodeJSONValue decodes data, keeping numbers as written.
func decodeJSONValue(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// storedAt reads message seq of mailbox stream stream from the stream's
// leader: what JetStream stored, not what an index says (see
// [bus.Conn.StoredAt]); an error wrapping bus.ErrNoMessage when there is
// none.
func (g *Gateway) storedAt(ctx context.Context, stream string, seq uint64) (bus.StoredMsg, error) {
	return g.conn.StoredAt(ctx, stream, seq, "")
}
