package retry

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy says how often and how fast failing work is tried again. Zero
// fields take the defaults of the package running the policy ([Policy.Or]):
// an effector's logic (actor.Kind.Retry) and an agent node (task.Node.Retry)
// take [Default]'s; a graph node makes one attempt unless Attempts says
// more, with Backoff 100ms, Multiplier 2, MaxBackoff 10s and Jitter 0.2; an
// LLM request makes 3 attempts, Backoff 250ms, MaxBackoff 8s.
//
// A Policy holds a func (RetryOn), so it cannot be compared with ==; use
// [Policy.IsZero].
type Policy struct {
	// Attempts is the number of tries, the first included.
	Attempts int
	// Backoff is the wait before the first retry.
	Backoff time.Duration
	// MaxBackoff caps the wait.
	MaxBackoff time.Duration
	// Multiplier grows the wait after each retry (at least 1).
	Multiplier float64
	// Jitter spreads each wait at random by up to this fraction of it, up
	// or down (0.2: ±20%); 0 for none. Below 1.
	Jitter float64
	// RetryOn, when set, reports whether an error is worth retrying; an
	// error it refuses is treated as permanent. [Permanent] errors are never
	// retried, whatever it says.
	RetryOn func(error) bool
}

// Default is the policy of an effector's logic and an agent node: 4
// attempts, waits of 100ms doubling up to 5s, no jitter.
func Default() Policy {
	return Policy{Attempts: 4, Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, Multiplier: 2}
}

// IsZero reports whether p is the zero Policy.
func (p Policy) IsZero() bool {
	return p.Attempts == 0 && p.Backoff == 0 && p.MaxBackoff == 0 && p.Multiplier == 0 && p.Jitter == 0 && p.RetryOn == nil
}

// Or returns p with its zero fields taken from def.
func (p Policy) Or(def Policy) Policy {
	if p.Attempts == 0 {
		p.Attempts = def.Attempts
	}
	if p.Backoff == 0 {
		p.Backoff = def.Backoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = def.MaxBackoff
	}
	if p.Multiplier == 0 {
		p.Multiplier = def.Multiplier
	}
	if p.Jitter == 0 {
		p.Jitter = def.Jitter
	}
	if p.RetryOn == nil {
		p.RetryOn = def.RetryOn
	}
	return p
}

// Validate reports a policy with a negative number, a Multiplier other than
// 0 (default) below 1, or a Jitter outside [0, 1). The error matches
// [ErrInvalid].
func (p Policy) Validate() error {
	switch {
	case p.Attempts < 0 || p.Backoff < 0 || p.MaxBackoff < 0 || p.Multiplier < 0:
		return fmt.Errorf("%w: attempts, backoff, multiplier and max backoff must not be negative", ErrInvalid)
	case p.Multiplier != 0 && p.Multiplier < 1:
		return fmt.Errorf("%w: multiplier %v must be at least 1", ErrInvalid, p.Multiplier)
	case p.Jitter < 0 || p.Jitter >= 1:
		return fmt.Errorf("%w: jitter %v must be in [0, 1)", ErrInvalid, p.Jitter)
	}
	return nil
}

// Retryable reports whether err is worth another attempt: it is not nil, not
// [Permanent], and RetryOn (when set) accepts it. It does not count
// attempts.
func (p Policy) Retryable(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	return p.RetryOn == nil || p.RetryOn(err)
}

// Delay is the wait after failed attempt n (1-based): Backoff grown by
// Multiplier n-1 times (a Multiplier below 1 counts as 1), capped at
// MaxBackoff (0: no cap), then spread by Jitter.
func (p Policy) Delay(n int) time.Duration {
	d := float64(p.Backoff)
	for range n - 1 {
		if p.MaxBackoff > 0 && d >= float64(p.MaxBackoff) {
			break
		}
		d *= max(p.Multiplier, 1)
	}
	if p.MaxBackoff > 0 {
		d = min(d, float64(p.MaxBackoff))
	}
	if p.Jitter > 0 {
		d *= 1 - p.Jitter + 2*p.Jitter*rand.Float64()
	}
	return time.Duration(d)
}
