package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/nats-io/nats.go"
)

// errPermission marks a request the server refused for the user's
// permissions.
var errPermission = errors.New("permission denied")

// denials turns the server's permission violations into failures at once.
//
// NATS refuses a publish the user may not make by dropping it and sending
// the client an asynchronous -ERR: a request to a denied subject would wait
// for its timeout (tail dead, top and orch ls took 10, 30 and 60 s to fail
// as the client role). The connection's error handler cancels the context
// of the innermost scope instead, with a cause wrapping errPermission, so
// the request in flight ends within a round trip.
type denials struct {
	mu sync.Mutex // guards scopes
	// scopes are the cancel functions of the open scopes, the whole
	// invocation's first; a violation cancels the last.
	scopes []context.CancelCauseFunc
}

// newDenials returns denials whose outermost scope is cancel.
func newDenials(cancel context.CancelCauseFunc) *denials {
	return &denials{scopes: []context.CancelCauseFunc{cancel}}
}

// handler is the connection's nats.ErrorHandler.
func (d *denials) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	d.mu.Lock()
	cancel := d.scopes[len(d.scopes)-1]
	d.mu.Unlock()
	cancel(deniedError(err))
}

// scope returns a context, derived from ctx, that a permission violation
// cancels instead of the invocation's: for a read the command can do
// without (send --wait's look at the dead letters). Call end when the read
// is over; denied then reports whether it was refused.
func (d *denials) scope(ctx context.Context) (sctx context.Context, end func() (denied error)) {
	sctx, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	d.scopes = append(d.scopes, cancel)
	n := len(d.scopes)
	d.mu.Unlock()
	return sctx, func() error {
		d.mu.Lock()
		d.scopes = d.scopes[:n-1]
		d.mu.Unlock()
		cause := context.Cause(sctx)
		cancel(nil)
		if errors.Is(cause, errPermission) {
			return cause
		}
		return nil
	}
}

// violatedRe finds the subject in the server's text of a permission
// violation ("Permissions Violation for Publish to \"$JS.API...\""): the
// client gets nothing else that names it (nats.go itself reads
// subscription violations with a regular expression too).
var violatedRe = regexp.MustCompile(`for (Publish|Subscription) to "([^"]+)"`)

// deniedError is a permission violation as ea says it: permission denied,
// to publish to or subscribe to which subject.
func deniedError(err error) error {
	m := violatedRe.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%w: %w", errPermission, err)
	}
	verb := "publish to"
	if m[1] == "Subscription" {
		verb = "subscribe to"
	}
	return &deniedErr{verb: verb, subject: m[2], err: err}
}

// deniedErr is a refused publish or subscription.
type deniedErr struct {
	verb, subject string
	err           error // the connection's, wrapping nats.ErrPermissionViolation
}

func (e *deniedErr) Error() string {
	return fmt.Sprintf("permission denied: this NATS user may not %s %s", e.verb, e.subject)
}

func (e *deniedErr) Is(target error) bool { return target == errPermission }
func (e *deniedErr) Unwrap() error        { return e.err }
