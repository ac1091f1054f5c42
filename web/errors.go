package web

import (
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/store"
)

// ErrInvalid is matched by configuration errors ([Config.Validate], [New]).
var ErrInvalid = errors.New("invalid gateway configuration")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Close codes the gateway ends a connection with, besides the standard
// ones (1001 going away when the gateway stops, 1009 for a frame over
// [Config.MaxFrame], 1008 policy violation). The close reason says more.
const (
	// CloseUnauthorized: no token, a wrong token, no auth frame in time, or
	// the token was revoked (removed from the users file).
	CloseUnauthorized websocket.StatusCode = 4401
	// CloseSlowReader: frames for the client waited longer than
	// [Config.SlowReader] for room in its send buffer.
	CloseSlowReader websocket.StatusCode = 4408
)

// Error codes of error frames (the "code" field).
const (
	CodeBadFrame        = "bad_frame"       // not a JSON object, or fields of the wrong type
	CodeUnknownType     = "unknown_type"    // a "type" the gateway does not know
	CodeBadRequest      = "bad_request"     // a field is missing or invalid (kind, id, subject, record…)
	CodeNotFound        = "not_found"       // no such effector, record or orchestration
	CodeForbidden       = "forbidden"       // it exists, and belongs to another user
	CodeTerminated      = "terminated"      // the effector is terminated
	CodeExists          = "exists"          // create: the effector exists
	CodeConflict        = "conflict"        // the record id is already used by another record
	CodeUndeclaredType  = "undeclared_type" // send: the kind declares the record types it handles, and not this one
	CodeNoHost          = "no_host"         // no node hosts the kind
	CodeNotWaiting      = "not_waiting"     // orch.input: the orchestration is not waiting for input
	CodeFinished        = "finished"        // the orchestration is over
	CodeUnavailable     = "unavailable"     // NATS, the store or the supervisors do not answer
	CodeTooManySubs     = "too_many_subscriptions"
	CodeDuplicateSub    = "duplicate_subscription"
	CodeUnknownSub      = "unknown_subscription"
	CodeSubscriptionEnd = "subscription_failed" // a subscription ended on an error
	CodeInternal        = "internal"
)

// codeOf maps an error of the packages the gateway calls to an error code.
func codeOf(err error) string {
	var ce *actor.ControlError
	switch {
	case errors.Is(err, actor.ErrInvalid), errors.Is(err, store.ErrInvalid),
		errors.Is(err, store.ErrBadCursor), errors.Is(err, store.ErrPageTooLarge), errors.Is(err, store.ErrUnknownKind):
		return CodeBadRequest
	case errors.Is(err, actor.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, actor.ErrTerminated):
		return CodeTerminated
	case errors.Is(err, actor.ErrExists):
		return CodeExists
	case errors.Is(err, actor.ErrNoHost):
		return CodeNoHost
	case errors.Is(err, store.ErrUnavailable):
		return CodeUnavailable
	case errors.As(err, &ce):
		switch ce.Code {
		case 400:
			return CodeBadRequest
		case 404:
			return CodeNotFound
		case 409:
			return CodeExists
		case 410:
			return CodeTerminated
		case 503:
			return CodeNoHost
		}
	}
	return CodeInternal
}
