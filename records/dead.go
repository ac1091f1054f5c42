package records

import (
	"crypto/sha256"
	"encoding/hex"
)

// Header names of a dead letter, besides [HeaderError]. A dead letter is the
// record that could not be processed, as stored in its mailbox (its headers
// and payload, as much as fits), with these headers added; the original stays
// in its stream at EA-Seq.
const (
	// HeaderDeadReason is the short reason code of a dead letter (decode,
	// content_type, oversize, rejected, failed, panic, redelivered,
	// cancelled, no_effector, terminated, reply_forbidden, output_too_large,
	// state_too_large).
	HeaderDeadReason = "EA-Dead-Reason"
	// HeaderSeq is the stream sequence of the original record.
	HeaderSeq = "EA-Seq"
	// HeaderSubject is the subject the original record was sent to.
	HeaderSubject = "EA-Subject"
	// HeaderStream is the stream that holds the original record: with
	// HeaderSeq, where to fetch it whole.
	HeaderStream = "EA-Stream"
	// HeaderTruncated is present when the dead letter does not carry the
	// whole record, because the copy would exceed the server's limits: its
	// values are [TruncatedPayload] (the payload is cut short) and
	// [TruncatedHeaders] (original headers were left out), comma-separated.
	HeaderTruncated = "EA-Truncated"
)

// Values of [HeaderTruncated].
const (
	TruncatedPayload = "payload"
	TruncatedHeaders = "headers"
)

// DeadID returns the record id (Nats-Msg-Id) of the dead letter of the record
// with id: "dead:<id>", or "dead:h<hash of id>" when id is not a valid record
// id (too long, or not printable ASCII without spaces). It is the same every
// time, so a dead letter written twice is de-duplicated.
func DeadID(id string) string {
	if idGot(id) != "" || len("dead:")+len(id) > MaxIDLen {
		sum := sha256.Sum256([]byte(id))
		return "dead:h" + hex.EncodeToString(sum[:16])
	}
	return "dead:" + id
}
