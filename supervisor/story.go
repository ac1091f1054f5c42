package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// TypeStatus is the type of the status records supervisors write.
const TypeStatus = "status"

// StatusRecord is the JSON payload of a status record. After every change
// to an orchestration (its start, each result or error from a worker, each
// input, a cancel), the supervisor writes one to the orchestration's
// outbox, <prefix>.out.supervisor.<id>, with EA-Process set to the
// orchestration id, EA-Type [TypeStatus] and EA-Cause the record that
// caused the change (a result, for results): so the record log alone tells
// the story of an orchestration (store.Query{Process: id}), and
// actor.Client.Subscribe(ctx, records.Ref{Kind: "supervisor", ID: id})
// follows it live.
//
// Waits show as Status WAITING (input) or RUNNING with WaitingFor naming the
// workers; the end as a final Status (COMPLETED, FAILED, CANCELLED).
//
// The record is written after the change is committed to the orchestration
// bucket, with the id <orchestration id>.<steps>.status. A supervisor that
// dies between the two writes leaves the status record out; the next change
// of that orchestration, on any supervisor, writes the missing one first
// (it checks the last status record of the orchestration's outbox), so
// none is lost and none is written twice.
type StatusRecord struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Event is what made the change: start, result, error (a worker's error
	// or dead-lettered task), input or cancel.
	Event string `json:"event"`
	// Step is the graph node the orchestration is at; Steps counts changes.
	Step       string `json:"step"`
	Steps      int    `json:"steps"`
	WaitingFor string `json:"waiting_for,omitempty"`
	// Worker is the worker whose result or error caused the change.
	Worker string `json:"worker,omitempty"`
	Error  string `json:"error,omitempty"`
	Owner  string `json:"owner,omitempty"`
}

// outbox is the subject of orchestration id's status records.
func (s *Supervisor) outbox(id string) string {
	return s.names.Outbox(records.Ref{Kind: MailboxKind, ID: id})
}

// eventRecovered is the Event of a status record written late, for a
// change whose supervisor died before writing it (the event is not known).
const eventRecovered = "recovered"

// statusRecord is the status record of the change ev made, giving r; a nil
// ev is a change whose event is not known (see catchUp).
func statusRecord(r orchRecord, ev *event) (records.Record, error) {
	st := StatusRecord{
		ID: r.ID, Name: r.Name, Status: r.Status, Event: eventRecovered, Step: r.Step, Steps: r.Steps,
		WaitingFor: r.WaitingFor, Error: r.Error, Owner: r.Owner,
	}
	var cause string
	if ev != nil {
		st.Event = ev.kind.String()
	}
	if ev != nil && ev.kind == evResult {
		cause = ev.rec.ID
		if ev.rec.Type == answerError {
			st.Event = answerError
		}
		if !ev.rec.From.IsZero() {
			st.Worker = ev.rec.From.String()
		}
	}
	body, err := json.Marshal(st)
	if err != nil {
		return records.Record{}, err
	}
	return records.Record{
		ID:          r.ID + "." + strconv.Itoa(r.Steps) + "." + TypeStatus,
		Type:        TypeStatus,
		From:        records.Ref{Kind: MailboxKind, ID: r.ID},
		Process:     r.ID,
		Owner:       r.Owner,
		Cause:       cause,
		Time:        r.Updated,
		ContentType: records.ContentJSON,
		Payload:     body,
	}, nil
}

// tell writes the status record of the change ev made, giving r (just
// written). A failure is logged, not returned: the change is committed, and
// the orchestration's next change writes the record (catchUp).
func (s *Supervisor) tell(ctx context.Context, r orchRecord, ev *event) {
	if s.dieBeforeTell != nil && s.dieBeforeTell(r.ID, r.Steps) {
		return
	}
	rec, err := statusRecord(r, ev)
	if err == nil {
		_, err = s.conn.JetStream().PublishMsg(ctx, rec.Msg(s.outbox(r.ID)), jetstream.WithMsgID(rec.ID))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.told, r.ID)
		s.log.Warn("status record not written; the orchestration's next change writes it", "orchestration", r.ID, "steps", r.Steps, "err", err)
		return
	}
	if r.Status.Final() {
		delete(s.told, r.ID)
	} else {
		s.told[r.ID] = r.Steps
	}
}

// catchUp writes the status record of cur, the orchestration as read before
// a change, when this supervisor did not write it and the orchestration's
// outbox does not end with it: its writer died between the change and the
// record.
func (s *Supervisor) catchUp(ctx context.Context, cur orchRecord) error {
	s.mu.Lock()
	told := s.told[cur.ID] == cur.Steps
	s.mu.Unlock()
	if told || cur.Steps == 0 {
		return nil
	}
	stream, err := s.conn.OutboxStreamOf(ctx, s.names.GroupOf(records.Ref{Kind: MailboxKind, ID: cur.ID}))
	if err != nil {
		return err
	}
	last, err := stream.GetLastMsgForSubject(ctx, s.outbox(cur.ID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("last status record of %s: %w", cur.ID, err)
	default:
		var st StatusRecord
		if json.Unmarshal(last.Data, &st) == nil && st.Steps >= cur.Steps {
			s.mu.Lock()
			s.told[cur.ID] = cur.Steps
			s.mu.Unlock()
			return nil
		}
	}
	// The event that made cur is not known any more: the record says so.
	s.tell(ctx, cur, nil)
	return nil
}
