// Package deadletter turns a dead letter back into a record to send again:
// the code `ea dead replay` and the gateway's dead.replay request share.
//
// A dead letter (records.HeaderDeadReason and friends) is the record that
// could not be processed, as stored in its mailbox, with headers naming where
// the original is. [Replay] returns that record as a new one linked to it:
// a new id and time, EA-Cause the original's id, so that a replay is never
// taken for a duplicate of the record that failed and can be traced to it.
package deadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// Errors of [Replay], matched with errors.Is.
var (
	// ErrNoMailbox: the dead letter's record was not sent to an effector's
	// mailbox, so there is nothing to send it to again.
	ErrNoMailbox = errors.New("nothing to replay it to")
	// ErrNoOriginal: the dead letter holds part of its record and the
	// original cannot be read from its stream.
	ErrNoOriginal = errors.New("the original record cannot be read")
	// ErrInvalid: the record is not valid; sent again, it would be
	// dead-lettered again.
	ErrInvalid = errors.New("sent again, it would be dead-lettered again")
)

// deadPrefix starts every dead letter's id (records.DeadID).
const deadPrefix = "dead:"

// OriginalID is the id of the record a dead letter with id deadID holds: the
// dead letter's id is "dead:<id>" (records.DeadID), or "dead:h<hash>" for an
// id that was not valid, which this returns as it is ("h<hash>").
func OriginalID(deadID string) string {
	return strings.TrimPrefix(deadID, deadPrefix)
}

// Replay returns the record dead letter m (as the dead-letter stream holds
// it) carries, as a new record linked to it (new id and time, EA-Cause the
// original's id, no subject or sequence), and the effector whose mailbox it
// was sent to. A truncated dead letter's record is read whole from its
// stream through conn. Errors wrap [ErrNoMailbox], [ErrNoOriginal] or
// [ErrInvalid], and name the dead letter by its sequence.
func Replay(ctx context.Context, conn *bus.Conn, m bus.StoredMsg) (records.Record, records.Ref, error) {
	h, data := m.Header, m.Data
	where := fmt.Sprintf("dead letter #%d", m.Seq)
	subject := h.Get(records.HeaderSubject)
	ref, ok := conn.Names().RefOf(subject)
	if !ok || !strings.Contains(subject, ".mbox.") || ref.Validate() != nil {
		return records.Record{}, records.Ref{}, fmt.Errorf("%s: its record was sent to %q, which is no effector's mailbox: %w", where, subject, ErrNoMailbox)
	}
	if t := h.Get(records.HeaderTruncated); t != "" {
		stream := h.Get(records.HeaderStream)
		seq, err := strconv.ParseUint(h.Get(records.HeaderSeq), 10, 64)
		if stream == "" || err != nil {
			return records.Record{}, records.Ref{}, fmt.Errorf("%s holds part of its record (EA-Truncated: %s) and does not say where the original is (%w)", where, t, ErrNoOriginal)
		}
		orig, err := conn.StoredAt(ctx, stream, seq, "")
		if err != nil {
			return records.Record{}, records.Ref{}, fmt.Errorf("%s holds part of its record (EA-Truncated: %s), and the original at %s #%d cannot be read: %w (%w)", where, t, stream, seq, err, ErrNoOriginal)
		}
		h, data = orig.Header, orig.Data
	}
	orig, err := records.FromMsg(subject, h, data)
	if err != nil {
		return records.Record{}, records.Ref{}, fmt.Errorf("%s: its record is not valid (%w): %w", where, err, ErrInvalid)
	}
	rec := orig
	rec.ID, rec.Cause, rec.Time = records.NewID(), OriginalID(orig.ID), time.Now()
	rec.Subject, rec.Seq = "", 0
	return rec, ref, nil
}
