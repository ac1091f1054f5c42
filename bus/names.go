package bus

import (
	"strings"

	"github.com/effectors/effectors/records"
)

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "ea"

// Names derives the subjects, streams and buckets of one deployment from its
// prefix. The zero value is not useful; use [NewNames] or [Conn.Names].
type Names struct {
	prefix string
	upper  string
}

// NewNames returns the names for prefix, which must be a single subject token
// (see [records.ValidateKind]); an empty prefix means [DefaultPrefix].
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := records.ValidateKind(prefix); err != nil {
		return Names{}, fmtInvalid("prefix %q: must be one subject token of A-Z a-z 0-9 _ -", prefix)
	}
	return Names{prefix: prefix, upper: strings.ToUpper(strings.ReplaceAll(prefix, "-", "_"))}, nil
}

// Prefix returns the subject prefix.
func (n Names) Prefix() string { return n.prefix }

// Mailbox returns the subject of r's mailbox: <prefix>.mbox.<kind>.<id>.
func (n Names) Mailbox(r records.Ref) string { return n.prefix + ".mbox." + r.Kind + "." + r.ID }

// Outbox returns the subject r emits on: <prefix>.out.<kind>.<id>.
func (n Names) Outbox(r records.Ref) string { return n.prefix + ".out." + r.Kind + "." + r.ID }

// Dead returns the subject of r's dead letters: <prefix>.dead.<kind>.<id>.
func (n Names) Dead(r records.Ref) string { return n.prefix + ".dead." + r.Kind + "." + r.ID }

// RefOf returns the effector a mailbox, outbox or dead-letter subject belongs
// to, and false when subject is none of those.
func (n Names) RefOf(subject string) (records.Ref, bool) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".")
	if !ok {
		return records.Ref{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || (parts[0] != "mbox" && parts[0] != "out" && parts[0] != "dead") {
		return records.Ref{}, false
	}
	r := records.Ref{Kind: parts[1], ID: parts[2]}
	return r, r.Validate() == nil
}

// RecordsStream is the stream holding mailboxes and outboxes (EA_RECORDS).
func (n Names) RecordsStream() string { return n.upper + "_RECORDS" }

// DeadStream is the stream holding dead letters (EA_DEAD).
func (n Names) DeadStream() string { return n.upper + "_DEAD" }

// StateBucket is the KV bucket of state documents (ea_state).
func (n Names) StateBucket() string { return n.prefix + "_state" }

// OrchBucket is the KV bucket of orchestration state (ea_orch).
func (n Names) OrchBucket() string { return n.prefix + "_orch" }

// PlaceBucket is the KV bucket of placement (ea_place): node heartbeats
// (node.<node id>), the effectors being driven (active.<kind>.<id>, naming
// the node that drives each) and each node's wake-up scan position
// (floor.<node id>).
func (n Names) PlaceBucket() string { return n.prefix + "_place" }

// StateKey is the key of r's state document: <kind>.<id>.
func (n Names) StateKey(r records.Ref) string { return r.Kind + "." + r.ID }

// Service is the name of the control micro service (the prefix itself).
func (n Names) Service() string { return n.prefix }

// Control is the subject of control operation op for kind:
// <prefix>.ctl.<op>.<kind>.
func (n Names) Control(op, kind string) string { return n.prefix + ".ctl." + op + "." + kind }
