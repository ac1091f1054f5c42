package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// storedMsg is one message of a stream as its leader holds it.
type storedMsg = bus.StoredMsg

// errNoMsg: the stream holds no such message.
var errNoMsg = bus.ErrNoMessage

// getMsg reads a message of stream from its leader: the one at seq, or with
// nextBySubject the first at or after seq on that subject (see
// [bus.Conn.StoredAt]: not a direct get, since what the runtime wrote last
// is the point here).
func getMsg(ctx context.Context, conn *bus.Conn, stream string, seq uint64, nextBySubject string) (storedMsg, error) {
	return conn.StoredAt(ctx, stream, seq, nextBySubject)
}

// deadCheck finds the dead letter of a record sent to ref, if the runtime
// wrote one: among ref's dead letters written after the send (the dead
// letter stream's last sequence, read before it), the one that names the
// record's id and mailbox sequence (records.DeadID, EA-Seq).
type deadCheck struct {
	stream, subject string
	after           uint64 // the dead letter stream's last sequence before the send
	// cursor is ref's state document's before the send (zero when there
	// was none): a send JetStream took for a duplicate of a record stored
	// earlier gets that record's sequence, which it may have passed.
	cursor actor.Document
	// denied, when set: this user may not read the dead letters.
	denied error
	// out finds the failure record the effector answered the record with
	// (core/task's task.error), for work applied that failed.
	out outputCheck
	// again: JetStream took the send for a duplicate of a record stored
	// before the send (see sent).
	again bool
}

// deadCheckFor reads where ref's cursor and dead letters stand, before a
// send. A user who may not read dead letters (the client role) gets a
// check whose denied says so; any other failure is an error.
func (a *app) deadCheckFor(ctx context.Context, c *actor.Client, ref records.Ref) (deadCheck, error) {
	conn := a.conn
	n := conn.Names()
	d := deadCheck{stream: n.DeadStream(), subject: n.Dead(ref)}
	if doc, err := c.State(ctx, ref); err == nil {
		d.cursor = doc
	}
	sctx, end := a.denials.scope(ctx)
	s, err := conn.JetStream().Stream(sctx, d.stream)
	if denied := end(); denied != nil {
		d.denied = denied
		d.out, err = a.outputCheckFor(ctx, ref)
		return d, err
	}
	if err != nil {
		return d, fmt.Errorf("dead letters (stream %s): %w", d.stream, err)
	}
	d.after = s.CachedInfo().State.LastSeq
	if d.out, err = a.outputCheckFor(ctx, ref); err != nil {
		return d, err
	}
	return d, nil
}

// sent returns the check for rec as sent. A record JetStream stored before
// (a duplicate id within the window, answered with the first one's
// sequence) that the cursor had passed already may have been dead-lettered
// before the send: then every dead letter of ref is looked at.
func (d deadCheck) sent(rec records.Record) deadCheck {
	if rec.Seq <= d.cursor.Seq || slices.Contains(d.cursor.Ahead, rec.Seq) {
		d.after, d.again = 0, true
	}
	return d
}

// find returns the dead letter of rec (as sent: id and seq), or false when
// the runtime wrote none. Call it once the state document says rec was
// applied: the runtime writes a record's dead letter before it moves the
// state document's seq past the record, so the answer is final then.
func (d deadCheck) find(ctx context.Context, conn *bus.Conn, rec records.Record) (deadJSON, bool, error) {
	id := records.DeadID(rec.ID)
	seq := d.after + 1
	for {
		m, err := getMsg(ctx, conn, d.stream, seq, d.subject)
		if errors.Is(err, errNoMsg) {
			return deadJSON{}, false, nil
		}
		if err != nil {
			return deadJSON{}, false, fmt.Errorf("dead letters of %s: %w", d.subject, err)
		}
		if m.Header.Get(records.HeaderID) == id && m.Header.Get(records.HeaderSeq) == strconv.FormatUint(rec.Seq, 10) {
			return deadOfStored(m), true, nil
		}
		seq = m.Seq + 1
	}
}

// deadOfStored reads a dead letter read with getMsg.
func deadOfStored(m storedMsg) deadJSON {
	return deadOf(deadMsg{subject: m.Subject, header: m.Header, data: m.Data, seq: m.Seq, stored: m.Time})
}

// errDeadLettered marks a record the runtime sent to dead letters (exit
// status 6).
var errDeadLettered = errors.New("dead-lettered")

// deadLetteredError is a record the runtime sent to dead letters; it
// matches errDeadLettered.
type deadLetteredError struct {
	rec    records.Record
	ref    records.Ref
	reason string // EA-Dead-Reason; empty when only the state document told
	text   string // EA-Error, or the state document's error
}

func (e *deadLetteredError) Error() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "record %s (seq %d) was stored, but %s sent it to dead letters", e.rec.ID, e.rec.Seq, e.ref)
	if e.reason != "" {
		fmt.Fprintf(&b, ": reason %s", e.reason)
	}
	if e.text != "" {
		fmt.Fprintf(&b, ": %s", e.text)
	}
	fmt.Fprintf(&b, " (ea tail dead %s shows it; ea dead replay %s sends it again)", e.ref, e.rec.ID)
	return b.String()
}

func (e *deadLetteredError) Is(target error) bool { return target == errDeadLettered }
