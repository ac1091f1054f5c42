package graph

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and when a failing node is tried again, within
// one step. The zero value means one attempt.
type RetryPolicy struct {
	// Attempts is the total number of attempts (0 or 1: no retry).
	Attempts int
	// Backoff is the wait before the second attempt (default 100ms when
	// Attempts > 1); it is multiplied by Multiplier (default 2) after each
	// attempt, up to MaxBackoff (default 10s), with ±20% jitter.
	Backoff    time.Duration
	Multiplier float64
	MaxBackoff time.Duration
	// RetryOn reports whether an error is worth retrying (default: all but
	// Permanent errors, panics and context errors).
	RetryOn func(error) bool
}

// Validate reports a policy with negative numbers.
func (p RetryPolicy) Validate() error {
	if p.Attempts < 0 || p.Backoff < 0 || p.MaxBackoff < 0 || p.Multiplier < 0 {
		return invalidArg("retry policy: attempts, backoff, multiplier and max backoff must not be negative")
	}
	if p.Multiplier != 0 && p.Multiplier < 1 {
		return invalidArg("retry policy: multiplier %v must be at least 1", p.Multiplier)
	}
	return nil
}

func (p RetryPolicy) retryable(err error) bool {
	var pe *PanicError
	var is *interruptSignal
	if errors.As(err, &is) || errors.As(err, &pe) || IsPermanent(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if p.RetryOn != nil {
		return p.RetryOn(err)
	}
	return true
}

// delay is the wait after attempt n (1-based) failed.
func (p RetryPolicy) delay(n int) time.Duration {
	d := p.Backoff
	if d == 0 {
		d = 100 * time.Millisecond
	}
	m := p.Multiplier
	if m == 0 {
		m = 2
	}
	maxd := p.MaxBackoff
	if maxd == 0 {
		maxd = 10 * time.Second
	}
	f := float64(d)
	for i := 1; i < n; i++ {
		f *= m
		if f > float64(maxd) {
			f = float64(maxd)
			break
		}
	}
	f *= 0.8 + 0.4*rand.Float64()
	return time.Duration(f)
}
