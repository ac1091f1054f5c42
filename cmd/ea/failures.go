package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// failureType reports whether an output of type typ says that the work a
// record asked for failed: "error" (what workers answer an orchestration's
// task with, see supervisor.Call) or a type ending in ".error" (core/task's
// "task.error", which the writer and assistant kinds emit when their run
// fails: the record is applied, not retried, and the failure is an output).
func failureType(typ string) bool {
	return typ == "error" || strings.HasSuffix(typ, ".error")
}

// outputCheck finds the failure an effector answered a record with: among
// ref's outputs (its outbox) stored after the send (the outbox stream's
// last sequence, read before it), one caused by the record (EA-Cause, its
// id) whose type is a failure type. An effector publishes a record's
// outputs before it moves its state document's seq past the record, so the
// answer is final once the state document says the record was applied.
type outputCheck struct {
	stream, subject string
	after           uint64 // the outbox stream's last sequence before the send
	// denied, when set: this user may not read the outbox stream.
	denied error
}

// outputCheckFor reads where ref's outbox stands, before a send. A user who
// may not read it gets a check whose denied says so; any other failure is
// an error.
func (a *app) outputCheckFor(ctx context.Context, ref records.Ref) (outputCheck, error) {
	n := a.conn.Names()
	o := outputCheck{stream: n.OutboxStreamFor(ref), subject: n.Outbox(ref)}
	sctx, end := a.denials.scope(ctx)
	s, err := a.conn.JetStream().Stream(sctx, o.stream)
	if denied := end(); denied != nil {
		o.denied = denied
		return o, nil
	}
	if err != nil {
		return o, fmt.Errorf("outputs (stream %s): %w", o.stream, err)
	}
	o.after = s.CachedInfo().State.LastSeq
	return o, nil
}

// find returns the failure record ref emitted for rec, or false when it
// emitted none. Call it once the state document says rec was applied.
// again is set when JetStream took the send for a duplicate of a record
// stored before: its outputs may then be older than the send, and every
// output of ref is looked at.
func (o outputCheck) find(ctx context.Context, conn *bus.Conn, rec records.Record, again bool) (records.Record, bool, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{o.subject}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if o.after > 0 && !again {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, o.after+1
	}
	cons, err := conn.JetStream().OrderedConsumer(ctx, o.stream, cfg)
	if err != nil {
		return records.Record{}, false, fmt.Errorf("outputs of %s: %w", o.subject, err)
	}
	for {
		// Every output of rec is stored already: a fetch that does not
		// wait ends the reading once it finds nothing more.
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return records.Record{}, false, fmt.Errorf("outputs of %s: %w", o.subject, err)
		}
		got := 0
		var found *records.Record
		for msg := range batch.Messages() {
			got++
			if found != nil {
				continue // drain the batch
			}
			h := msg.Headers()
			if h.Get(records.HeaderCause) != rec.ID || !failureType(h.Get(records.HeaderType)) {
				continue
			}
			out, err := records.FromMsg(msg.Subject(), h, msg.Data())
			if err != nil {
				return records.Record{}, false, fmt.Errorf("outputs of %s: %w", o.subject, err)
			}
			found = &out
		}
		if err := batch.Error(); err != nil {
			return records.Record{}, false, fmt.Errorf("outputs of %s: %w", o.subject, err)
		}
		if found != nil {
			return *found, true, nil
		}
		if got == 0 {
			return records.Record{}, false, nil
		}
	}
}

// errFailed marks work that was done and failed (exit status 8): a record
// the effector applied and answered with a failure record, an
// orchestration that ended FAILED.
var errFailed = errors.New("failed")

// failedError is a record that ref applied and answered with failure out.
// It matches errFailed.
type failedError struct {
	rec records.Record
	ref records.Ref
	out records.Record
}

func (e *failedError) Error() string {
	return fmt.Sprintf("record %s (seq %d) was applied, but the work failed: %s answered it with %s: %s (ea tail outbox %s shows it)",
		e.rec.ID, e.rec.Seq, e.ref, e.out.Type, failureText(e.out), e.ref)
}

func (e *failedError) Is(target error) bool { return target == errFailed }

// failureText is what a failure record says: its payload's "message" or
// "error" field when it has one (core/task's Failure, an orchestration
// worker's error answer), after its code when there is one, else the
// payload as JSON.
func failureText(r records.Record) string {
	var m map[string]any
	if err := r.Decode(&m); err == nil {
		msg, _ := m["message"].(string)
		if msg == "" {
			msg, _ = m["error"].(string)
		}
		if msg != "" {
			if code, _ := m["code"].(string); code != "" {
				return "(code " + code + ") " + msg
			}
			return msg
		}
	}
	var v any
	if err := r.Decode(&v); err != nil {
		return fmt.Sprintf("(a payload of %d bytes, %s)", len(r.Payload), r.ContentType)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("(a payload of %d bytes, %s)", len(r.Payload), r.ContentType)
	}
	return strings.TrimSpace(b.String())
}

// orchFailedError is an orchestration that ended FAILED. It matches
// errFailed.
type orchFailedError struct {
	o supervisor.Orchestration
}

func (e *orchFailedError) Error() string {
	msg := e.o.Error
	if msg == "" {
		msg = "no error recorded"
	}
	return fmt.Sprintf("orchestration %s (%s) FAILED at step %s: %s (ea orch status %s shows it; ea tail process %s its records)",
		e.o.ID, e.o.Name, e.o.Step, msg, e.o.ID, e.o.ID)
}

func (e *orchFailedError) Is(target error) bool { return target == errFailed }
