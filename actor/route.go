package actor

import (
	"errors"
	"fmt"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// Where records go. A record never steers the runtime: the node publishes
// only where [bus.Routes] allows (mailboxes, the effector's own outbox, and
// subjects in Options.ReplySubjects), whatever a record's EA-Reply says.
//
//   - At delivery, a record whose EA-Reply is not allowed goes to dead
//     letters at once, reason reply_forbidden, before the logic runs
//     ([effector.screen]).
//   - Every output logic adds through its [Context] is checked again
//     ([Context.check]): a forbidden one is refused with a permanent error
//     matching [ErrForbidden], so nothing forbidden is published even by
//     logic that ignores the error.
//   - An output too large for the server is refused the same way
//     ([ErrTooLarge]); one the server still refuses when published sends the
//     input record to dead letters (output_too_large) instead of retrying.

// newRoutes returns the routes of a node with opts.ReplySubjects, or an error
// naming the pattern that is not valid.
func newRoutes(names bus.Names, allowed []string) (bus.Routes, error) {
	r, err := names.Routes(allowed)
	if err != nil {
		return bus.Routes{}, invalidf("NewNode: ReplySubjects: %v", err)
	}
	return r, nil
}

// screen refuses, before the logic runs, a record that would make the node
// publish where records may not go: its EA-Reply names a forbidden subject.
// It returns the dead-letter reason and the failure, or "" and nil.
func (e *effector) screen(d delivery) (reason string, failure error) {
	if d.err != nil || d.rec.Reply == "" {
		return "", nil
	}
	if _, err := e.node.routes.Check(e.ref, d.rec.Reply); err != nil {
		return reasonReplyForbidden, fmt.Errorf("%s: %w", records.HeaderReply, err)
	}
	return "", nil
}

// check refuses an output that may not be published: a forbidden subject, or
// a message larger than the server takes. The error is permanent: retrying
// the logic cannot change it. The first refusal is kept, and the attempt fails
// with it even if the logic ignores the error ([Context.outcome]).
func (c *Context) check(o *output) error {
	err := c.refusal(o)
	if err != nil && c.refused == nil {
		c.refused = err
	}
	return err
}

func (c *Context) refusal(o *output) error {
	if o.subject == c.ownOutbox() {
		// The effector's own outbox (the routes allow it, a stream subject)
		// without parsing the subject again: every Emit takes this path.
		o.stream = true
		if err := reservedType(c.self, o.subject, o.rec.Type, c.ownOutbox()); err != nil {
			return err
		}
	} else {
		stream, err := c.routes.Check(c.self, o.subject)
		if err != nil {
			return Permanent(fmt.Errorf("record %q: %w", o.rec.Type, err))
		}
		o.stream = stream
	}
	if c.maxMsg <= 0 {
		return nil
	}
	msg := o.message()
	hdr := bus.HeaderSize(msg.Header)
	switch {
	case hdr > bus.MaxHeaderBytes:
		return Permanent(fmt.Errorf("record %q to %s: %w: headers of %d bytes exceed JetStream's limit of %d", o.rec.Type, o.subject, ErrTooLarge, hdr, bus.MaxHeaderBytes))
	case int64(hdr+len(msg.Data)) > c.maxMsg:
		return Permanent(fmt.Errorf("record %q to %s: %w: %d bytes (payload %d, headers %d) exceed the server's max_payload of %d", o.rec.Type, o.subject, ErrTooLarge, hdr+len(msg.Data), len(msg.Data), hdr, c.maxMsg))
	}
	// Publish the message measured: its headers are not built twice. The
	// record is not changed after it is checked.
	o.msg = msg
	return nil
}

// outcome is the result of an attempt whose logic returned err: err, or the
// first output refused when the logic ignored that error and returned nil.
func (c *Context) outcome(err error) error {
	if err == nil {
		return c.refused
	}
	return err
}

// outcomeReason is the dead-letter reason of a permanent failure of the
// logic caused by a refused output, or "".
func outcomeReason(err error) string {
	if errors.Is(err, ErrTooLarge) {
		return reasonOutputTooLarge
	}
	return ""
}
