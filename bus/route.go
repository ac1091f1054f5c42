package bus

import (
	"errors"
	"fmt"
	"strings"

	"github.com/effectors/effectors/records"
)

// DefaultReplySubjects is the operator allow-list of [Routes] when none is
// configured: NATS request-reply inboxes, so that a plain `nats req` to a
// mailbox gets its answer.
var DefaultReplySubjects = []string{"_INBOX.>"}

// ErrForbidden is matched by every [*ForbiddenError]: a record may not be
// sent to a subject.
var ErrForbidden = errors.New("forbidden destination")

// ForbiddenError says why a record may not be sent to Subject. It matches
// [ErrForbidden].
type ForbiddenError struct {
	// Subject is the refused destination (cut short when very long).
	Subject string
	// Rule is the rule it broke, e.g. "a NATS system subject ($-prefixed)".
	Rule string
	// Fix says what to do about it, if anything can be done.
	Fix string
}

func (e *ForbiddenError) Error() string {
	s := fmt.Sprintf("%s: %q is %s", ErrForbidden, e.Subject, e.Rule)
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// Unwrap returns [ErrForbidden].
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// Routes decides where a record may be sent: where a node publishes the
// records logic sends and replies to, and which EA-Reply subjects a record may
// carry at all. It is the one place that decides it; build it with
// [Names.Routes]. The zero value refuses everything.
//
// The rules, in order:
//
//   - a subject whose first token starts with '$' ($JS, $KV, $O, $SYS, $JSC,
//     $NRG, $SRV, …) is refused: those are the server's APIs;
//   - a mailbox <prefix>.mbox.<kind>.<id> is allowed, and stored by the
//     records stream;
//   - the sender's own outbox <prefix>.out.<kind>.<id> is allowed, and stored;
//   - every other subject under <prefix>. is refused: other effectors'
//     outboxes, dead letters, control (<prefix>.ctl.>), orchestration
//     (<prefix>.orch.>) and anything the runtime may use later;
//   - any other subject is allowed only if it matches a pattern of the
//     operator allow-list (NATS wildcards, default [DefaultReplySubjects]),
//     and is published as a plain NATS message.
//
// NATS subjects are case-sensitive, so "EA.ctl.x" is not under prefix "ea"
// and "$kv.x" is still $-prefixed. The allow-list never overrides a refusal.
type Routes struct {
	names   Names
	allowed []string
}

// Routes returns the routes of this deployment with the operator allow-list
// allowed (nil means [DefaultReplySubjects]; an empty non-nil slice allows no
// other subject). Each pattern must be a valid subject, '*' and '>' being
// whole-token wildcards and '>' last; a pattern that can only match refused
// subjects ($-prefixed, or under the prefix) is an error naming it. Errors
// wrap [ErrInvalidConfig].
func (n Names) Routes(allowed []string) (Routes, error) {
	if allowed == nil {
		allowed = DefaultReplySubjects
	}
	r := Routes{names: n, allowed: make([]string, 0, len(allowed))}
	for _, p := range allowed {
		if why := subjectGot(p, true); why != "" {
			return Routes{}, fmtInvalid("reply subject pattern %q: %s", p, why)
		}
		first, _, _ := strings.Cut(p, ".")
		switch {
		case strings.HasPrefix(first, "$"):
			return Routes{}, fmtInvalid("reply subject pattern %q: matches only NATS system subjects ($-prefixed), which records may never be sent to", p)
		case first == n.prefix:
			return Routes{}, fmtInvalid("reply subject pattern %q: subjects under %q are the runtime's own: mailboxes and the sender's outbox are always allowed, everything else there never is", p, n.prefix+".")
		}
		r.allowed = append(r.allowed, p)
	}
	return r, nil
}

// Allowed returns the operator allow-list in effect.
func (r Routes) Allowed() []string { return append([]string(nil), r.allowed...) }

// Check reports whether effector from (zero for a sender outside the
// runtime) may send a record to subject, and whether subject is stored by the
// records stream (publish through JetStream) rather than a plain NATS subject.
// A refusal is a [*ForbiddenError].
func (r Routes) Check(from records.Ref, subject string) (stream bool, err error) {
	if r.names.prefix == "" {
		return false, &ForbiddenError{Subject: cut(subject), Rule: "not allowed: the routes were not configured (use Names.Routes)"}
	}
	if why := subjectGot(subject, false); why != "" {
		return false, &ForbiddenError{Subject: cut(subject), Rule: "not a NATS subject to publish to: " + why}
	}
	tokens := strings.Split(subject, ".")
	if strings.HasPrefix(tokens[0], "$") {
		return false, &ForbiddenError{Subject: cut(subject), Rule: "a NATS system subject ($-prefixed: JetStream, KV, object store, system account APIs)", Fix: "records may never be sent there"}
	}
	if tokens[0] == r.names.prefix {
		return r.checkOwn(from, subject, tokens)
	}
	for _, p := range r.allowed {
		if Match(p, subject) {
			return false, nil
		}
	}
	return false, &ForbiddenError{Subject: cut(subject), Rule: "not a mailbox and not in the allowed reply subjects " + fmt.Sprint(r.allowed), Fix: "allow it with --reply-subjects (actor.Options.ReplySubjects) if records should be sent there"}
}

// checkOwn decides a subject under the prefix.
func (r Routes) checkOwn(from records.Ref, subject string, tokens []string) (bool, error) {
	refuse := func(rule string) (bool, error) {
		return false, &ForbiddenError{Subject: cut(subject), Rule: rule, Fix: "records may only be sent to mailboxes <prefix>.mbox.<kind>.<id> there"}
	}
	if len(tokens) < 2 {
		return refuse("a runtime subject")
	}
	switch tokens[1] {
	case "out":
		if r.names.Groups() > 1 {
			return r.checkGroupedOutbox(from, subject, refuse)
		}
		fallthrough
	case "mbox":
		if len(tokens) != 4 {
			return refuse(fmt.Sprintf("not a %s subject %s.%s.<kind>.<id> (%d tokens)", map[string]string{"mbox": "mailbox", "out": "outbox"}[tokens[1]], r.names.prefix, tokens[1], len(tokens)))
		}
		ref := records.Ref{Kind: tokens[2], ID: tokens[3]}
		if err := ref.Validate(); err != nil {
			return refuse("not a valid effector subject: " + err.Error())
		}
		if tokens[1] == "mbox" {
			return true, nil
		}
		if ref == from {
			return true, nil
		}
		return refuse("the outbox of another effector (" + ref.String() + ")")
	case "dead":
		return refuse("a dead-letter subject")
	case "ctl":
		return refuse("a control subject")
	case "orch":
		return refuse("an orchestration subject")
	}
	return refuse("a runtime subject")
}

// checkGroupedOutbox decides an outbox subject when the deployment has
// stream groups: only from's own, as [Names.Outbox] makes it
// (<prefix>.out.<partition>.<kind>.<id>).
func (r Routes) checkGroupedOutbox(from records.Ref, subject string, refuse func(string) (bool, error)) (bool, error) {
	ref, p, ok := r.names.GroupedOutboxOf(subject)
	switch {
	case !ok:
		return refuse(fmt.Sprintf("not an outbox subject %s.out.<partition>.<kind>.<id> (with %d stream groups outboxes carry their partition)", r.names.prefix, r.names.Groups()))
	case ref.Validate() != nil:
		return refuse("not a valid effector subject: " + ref.Validate().Error())
	case ref != from:
		return refuse("the outbox of another effector (" + ref.String() + ")")
	case p != r.names.Partition(ref):
		return refuse(fmt.Sprintf("names partition %d, but %s belongs to partition %d", p, ref, r.names.Partition(ref)))
	}
	return true, nil
}

// Match reports whether subject matches pattern, '*' matching one token and
// '>' (last) one or more, as NATS matches subscriptions.
func Match(pattern, subject string) bool {
	for {
		pt, prest, pmore := strings.Cut(pattern, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case pt == ">":
			return true // '>' needs at least one token: st is one
		case pt != "*" && pt != st:
			return false
		case !pmore || !smore:
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}

// subjectGot returns "" when s is a valid subject (a pattern when wild), or
// what is wrong with it.
func subjectGot(s string, wild bool) string {
	if s == "" {
		return "empty"
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return "an empty token"
		case (t == "*" || t == ">") && !wild:
			return "wildcard token " + t
		case t == ">" && i != len(tokens)-1:
			return "'>' must be the last token"
		}
		for j := 0; j < len(t); j++ {
			if c := t[j]; c <= ' ' || c == 0x7f {
				return fmt.Sprintf("control character or space %q in token %q", c, t)
			}
		}
	}
	return ""
}

// cut shortens s for an error message.
func cut(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}
