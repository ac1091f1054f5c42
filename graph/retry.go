package graph

import (
	"context"
	"errors"
	"time"

	"github.com/effectors/effectors/retry"
)

// RetryPolicy says how often and when a failing node is tried again, within
// one step: it is [retry.Policy], the one policy type of every package. The
// zero value means one attempt. With Attempts > 1, Backoff is the wait
// before the second attempt (default 100ms), multiplied by Multiplier
// (default 2) after each attempt up to MaxBackoff (default 10s), spread by
// Jitter (default 0.2: ±20%). RetryOn reports whether an error is worth
// retrying (default: all but [Permanent] errors, panics, interrupts and
// context errors, which are never retried). [WithRetry] validates it.
type RetryPolicy = retry.Policy

// nodeRetry holds a graph node's defaults for the zero fields of a policy.
var nodeRetry = retry.Policy{Attempts: 1, Backoff: 100 * time.Millisecond, Multiplier: 2, MaxBackoff: 10 * time.Second, Jitter: 0.2}

// retryable reports whether a node's err is worth another attempt under p.
func retryable(p RetryPolicy, err error) bool {
	var pe *PanicError
	var is *interruptSignal
	if errors.As(err, &is) || errors.As(err, &pe) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return p.Retryable(err)
}
