package actor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// Header names the runtime adds to dead letters, besides records.HeaderError.
// They are the records package's; see records.HeaderDeadReason and below.
const (
	// HeaderDeadReason is the short reason code of a dead letter.
	HeaderDeadReason = records.HeaderDeadReason
	// HeaderSeq is the stream sequence the dead record had in its mailbox.
	HeaderSeq = records.HeaderSeq
	// HeaderSubject is the mailbox subject the dead record was sent to.
	HeaderSubject = records.HeaderSubject
)

// maxErrorText caps EA-Error.
const maxErrorText = 1024

// stored is a record as its stream holds it, to be dead-lettered.
type stored struct {
	stream  string
	subject string
	seq     uint64
	header  nats.Header
	data    []byte
}

// deadLetter publishes rec to subject (a dead-letter subject) with the reason, and
// returns once the dead-letter stream has it. A dead letter always fits: when
// the whole record would not ([deadLetterMsg]), it carries what fits and
// EA-Truncated; if the server still refuses it as too large (a stream or
// account limit below the connection's), a dead letter without the original
// headers and payload is written instead. Either way EA-Stream and EA-Seq say
// where the original is.
func (n *Node) deadLetter(ctx context.Context, subject string, rec stored, reason string, why error) error {
	limit := n.conn.MaxPayload()
	msg := deadLetterMsg(subject, rec, reason, why, limit, false)
	err := n.publishSync(ctx, msg)
	if bus.TooLarge(err) {
		n.log.Warn("dead letter refused as too large; writing it without the record's headers and payload", "subject", subject, "seq", rec.seq, "err", err)
		msg = deadLetterMsg(subject, rec, reason, why, limit, true)
		err = n.publishSync(ctx, msg)
	}
	return wrapPublish(subject, err)
}

// publishSync publishes msg to a stream and waits for its acknowledgement,
// through the node's Publisher once it runs (an acknowledgement lost with a
// dropped connection ends the wait at once: bus.ErrAckLost).
func (n *Node) publishSync(ctx context.Context, msg *nats.Msg) error {
	if n.pub != nil {
		_, err := n.pub.PublishMsg(ctx, msg)
		return err
	}
	_, err := n.conn.JetStream().PublishMsg(ctx, msg)
	return err
}

// deadLetterMsg returns the dead letter of rec on subject: the record's
// headers and payload with EA-Error, EA-Dead-Reason, EA-Seq, EA-Subject,
// EA-Stream and the id [records.DeadID] added, as a message of at most
// maxPayload bytes (headers included) whose header block is at most
// [bus.MaxHeaderBytes]. What does not fit is left out: original headers that
// would overflow the header block (whole, largest names last in sorted
// order), then the end of the payload; EA-Truncated says which. The record's
// JetStream directives (headers starting with "Nats-") are never copied:
// they would steer the dead-letter write. bare leaves out every original
// header and the payload.
func deadLetterMsg(subject string, rec stored, reason string, why error, maxPayload int64, bare bool) *nats.Msg {
	// The record id as published, valid or not (DeadID hashes an invalid
	// one), or the one the runtime derives when there is none.
	id := ""
	if vs := rec.header[records.HeaderID]; len(vs) > 0 {
		id = vs[0]
	}
	if id == "" {
		id = "s" + strconv.FormatUint(rec.seq, 10)
	}
	text := strings.NewReplacer("\r", " ", "\n", " ").Replace(why.Error())
	if len(text) > maxErrorText {
		text = text[:maxErrorText] + "…"
	}
	h := nats.Header{}
	own := []struct{ key, value string }{
		{records.HeaderID, records.DeadID(id)},
		{records.HeaderError, text},
		{records.HeaderDeadReason, reason},
		{records.HeaderSeq, strconv.FormatUint(rec.seq, 10)},
		{records.HeaderSubject, rec.subject},
		{records.HeaderStream, rec.stream},
	}
	for _, o := range own {
		h[o.key] = []string{o.value}
	}
	budget := min(int64(bus.MaxHeaderBytes), maxPayload)
	// Room for EA-Truncated at its longest.
	reserve := bus.HeaderLineSize(records.HeaderTruncated, records.TruncatedHeaders+","+records.TruncatedPayload)
	size := bus.HeaderSize(h) + reserve
	var truncated []string
	keys := make([]string, 0, len(rec.header))
	for k := range rec.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if runtimeHeader(k) {
			continue
		}
		lines := 0
		for _, v := range rec.header[k] {
			lines += bus.HeaderLineSize(k, v)
		}
		if bare || int64(size+lines) > budget {
			if !slices.Contains(truncated, records.TruncatedHeaders) {
				truncated = append(truncated, records.TruncatedHeaders)
			}
			continue
		}
		h[k] = slices.Clone(rec.header[k])
		size += lines
	}
	data := rec.data
	room := max(maxPayload-int64(size), 0)
	if bare {
		room = 0
	}
	if int64(len(data)) > room {
		data = data[:room]
		truncated = append(truncated, records.TruncatedPayload)
	}
	if len(truncated) > 0 {
		h[records.HeaderTruncated] = []string{strings.Join(truncated, ",")}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}
}

// runtimeHeader reports whether header key of a record is left out of its
// dead letter: the dead-letter headers the runtime sets itself, and
// JetStream directives (Nats-Msg-Id, Nats-Expected-*, Nats-Rollup, Nats-TTL,
// …), which would make the dead-letter stream refuse or mangle the copy.
func runtimeHeader(key string) bool {
	if len(key) >= 5 && strings.EqualFold(key[:5], "Nats-") {
		return true
	}
	for _, k := range []string{records.HeaderError, records.HeaderDeadReason, records.HeaderSeq, records.HeaderSubject, records.HeaderStream, records.HeaderTruncated} {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// publishFailure marks a publish error that can never succeed as permanent
// (and as ErrTooLarge when it is about size), for logic that streams with
// EmitNow.
func publishFailure(err error) error {
	switch {
	case bus.TooLarge(err):
		return Permanent(fmt.Errorf("%w: %w", ErrTooLarge, err))
	case unpublishable(err):
		return Permanent(err)
	}
	return err
}
