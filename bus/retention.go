package bus

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Unlimited, as a [Retention] field, removes that limit from the streams.
const Unlimited = -1

// MinRetentionBytes is the smallest byte limit a [Retention] accepts: room
// for a few of the largest messages a server takes by default (1 MiB).
const MinRetentionBytes = 8 << 20

// Retention bounds how much of the record log and of the dead letters the
// streams keep. JetStream drops the oldest messages of a stream past either
// limit (limits retention, discard old), whether or not they were
// processed: a mailbox record dropped before its effector applied it is
// never applied, so keep the log's limits well above the longest backlog
// (and its age above the longest outage).
//
// Each field is per stream (EA_MBOX and EA_OUT each get the log's limits;
// EA_DEAD the dead letters'). 0 leaves the limit a stream already has alone
// (none for a stream being created), so a binary started without retention
// settings does not undo what an operator set through another; a positive
// value sets it; [Unlimited] removes it. Provisioning applies a change to
// existing streams at once (JetStream then drops what is over the new
// limits).
type Retention struct {
	// LogMaxAge bounds the age of mailbox and outbox records.
	LogMaxAge time.Duration
	// LogMaxBytes bounds the size of each of the mailbox and outbox
	// streams, in bytes.
	LogMaxBytes int64
	// DeadMaxAge bounds the age of dead letters.
	DeadMaxAge time.Duration
	// DeadMaxBytes bounds the size of the dead-letter stream, in bytes.
	DeadMaxBytes int64
}

// validate checks r against the duplicate window dup.
func (r Retention) validate(dup time.Duration) error {
	for _, a := range []struct {
		name string
		v    time.Duration
	}{{"log max age", r.LogMaxAge}, {"dead max age", r.DeadMaxAge}} {
		switch {
		case a.v < 0 && a.v != Unlimited:
			return fmtInvalid("%s %s: must be 0 (keep), positive, or unlimited", a.name, a.v)
		case a.v > 0 && a.v < dup:
			return fmtInvalid("%s %s: must not be shorter than the duplicate window %s (records would age out before their duplicates are recognised)", a.name, a.v, dup)
		}
	}
	for _, b := range []struct {
		name string
		v    int64
	}{{"log max bytes", r.LogMaxBytes}, {"dead max bytes", r.DeadMaxBytes}} {
		switch {
		case b.v < 0 && b.v != Unlimited:
			return fmtInvalid("%s %d: must be 0 (keep), positive, or unlimited", b.name, b.v)
		case b.v > 0 && b.v < MinRetentionBytes:
			return fmtInvalid("%s %d: must be at least %d (8 MiB)", b.name, b.v, MinRetentionBytes)
		}
	}
	return nil
}

// limits fills the age and size limits of sc from want (see [Retention]),
// keeping those of have (the stream as it exists; nil when it does not).
func limits(sc *jetstream.StreamConfig, have *jetstream.StreamConfig, maxAge time.Duration, maxBytes int64) {
	switch {
	case maxAge > 0:
		sc.MaxAge = maxAge
	case maxAge == Unlimited:
		sc.MaxAge = 0
	case have != nil:
		sc.MaxAge = have.MaxAge
	}
	switch {
	case maxBytes > 0:
		sc.MaxBytes = maxBytes
	case maxBytes == Unlimited:
		sc.MaxBytes = -1
	case have != nil:
		sc.MaxBytes = have.MaxBytes
	default:
		sc.MaxBytes = -1
	}
	if sc.MaxBytes == 0 {
		sc.MaxBytes = -1 // the server reports "none" as -1
	}
}

// retain sets the limits of sc, a stream about to be provisioned, from the
// connection's retention and the stream as it exists.
func (c *Conn) retain(sc *jetstream.StreamConfig, have *jetstream.StreamConfig) {
	r := c.cfg.Retention
	if sc.Name == c.names.DeadStream() {
		limits(sc, have, r.DeadMaxAge, r.DeadMaxBytes)
		return
	}
	limits(sc, have, r.LogMaxAge, r.LogMaxBytes)
}
