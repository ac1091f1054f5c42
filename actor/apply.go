package actor

import (
	"context"
	"log/slog"
	"runtime/debug"

	"github.com/effectors/effectors/bus"
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
// or the error, a panic becoming a [*PanicError]. Outputs are checked as a
// node checks them with the default Options.ReplySubjects: a reply to a
// subject records may not be sent to fails with [ErrForbidden], even if the
// logic ignores the error. Use it to unit-test logic.
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
	c := &Context{Context: ctx, self: self, rec: rec, base: discardLogger, names: names, routes: routes}
	defer func() {
		if v := recover(); v != nil {
			next, outs, err = state, nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	next, err = k.Logic(c, state)
	if err = c.outcome(err); err != nil {
		return state, nil, err
	}
	for _, o := range c.outs {
		outs = append(outs, Output{Subject: o.subject, Record: o.rec})
	}
	return next, outs, nil
}

var discardLogger = slog.New(slog.DiscardHandler)
