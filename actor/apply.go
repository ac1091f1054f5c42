package actor

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// Output is a record logic sent, with the subject it goes to.
type Output struct {
	Subject string
	Record  records.Record
}

// Apply runs the logic once on rec and state, as a node would but without
// NATS: no retries, nothing published, nothing stored. It returns the new
// state and the outputs the logic sent (subjects under the default prefix),
// or the error, a panic becoming a [*PanicError]. Use it to unit-test logic.
//
// Apply runs what a node runs, so that a test sees what production would:
//
//   - the state goes through msgpack as a state document does (encoded with
//     [Kind]'s rules, decoded into a fresh S before the logic runs, and the
//     new state encoded and decoded again): a field tagged `json:"-"` or
//     unexported arrives zero, an `any` field holds what msgpack decodes
//     (map[string]any for a struct or map, int8/int64… for numbers), and a
//     state that cannot be encoded fails as it would on a node;
//   - rec goes through its NATS form ([records.Record.Msg], then
//     [records.FromMsg]) as it does through a mailbox: a malformed record or
//     payload, a content type not in Kind.Accept or a payload over
//     Kind.MaxPayload fails at once with a [Permanent] error, where a node
//     would dead-letter it; rec.ID and rec.Type get defaults when empty;
//   - outputs are checked as a node checks them with the default
//     Options.ReplySubjects: a reply to a subject records may not be sent to
//     fails with [ErrForbidden], even if the logic ignores the error.
func (k Kind[S]) Apply(ctx context.Context, self records.Ref, rec records.Record, state S) (next S, outs []Output, err error) {
	if err := self.Validate(); err != nil {
		return state, nil, invalidf("Apply: %v", err)
	}
	if k.Logic == nil {
		return state, nil, invalidf("Apply: kind %s has no Logic", k.Name)
	}
	if rec.ID == "" {
		rec.ID = records.NewID()
	}
	if rec.Type == "" {
		rec.Type = records.DefaultType
	}
	names, _ := bus.NewNames("")
	routes, _ := names.Routes(nil)
	mailbox := names.Mailbox(self)
	msg := rec.Msg(mailbox)
	if rec, err = records.FromMsg(mailbox, msg.Header, msg.Data); err != nil {
		return state, nil, Permanent(err)
	}
	if err := k.screen(rec); err != nil {
		return state, nil, err
	}
	cur, err := codec.Marshal(state)
	if err != nil {
		return state, nil, fmt.Errorf("Apply: encode state of %s: %w", self, err)
	}
	c := newCallContext(ctx, &call{self: self, rec: rec, base: discardLogger, names: names, routes: routes})
	defer func() {
		if v := recover(); v != nil {
			next, outs, err = state, nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	b, err := k.run(c, cur)
	if err = c.outcome(err); err != nil {
		return state, nil, err
	}
	if err := codec.Unmarshal(b, &next); err != nil {
		return state, nil, Permanent(fmt.Errorf("Apply: decode new state of %s: %w", self, err))
	}
	for _, o := range c.outs {
		outs = append(outs, Output{Subject: o.subject, Record: o.rec})
	}
	return next, outs, nil
}

// screen refuses rec as a node hosting k would (content type, payload size),
// with a permanent error.
func (k Kind[S]) screen(rec records.Record) error {
	accept := k.Accept
	if len(accept) == 0 {
		accept = []string{records.ContentMsgpack, records.ContentJSON}
	}
	if !slices.Contains(accept, rec.ContentType) {
		return Permanent(fmt.Errorf("%w: kind %s does not accept payloads of type %s (accepts %s)", ErrInvalid, k.Name, rec.ContentType, strings.Join(accept, ", ")))
	}
	if limit := orDefault(k.MaxPayload, 256<<10); limit > 0 && len(rec.Payload) > limit {
		return Permanent(fmt.Errorf("%w: payload of %d bytes exceeds the %d bytes kind %s accepts", ErrInvalid, len(rec.Payload), limit, k.Name))
	}
	return nil
}

var discardLogger = slog.New(slog.DiscardHandler)
