package actor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/effectors/effectors/records"
)

// errRetryAlone: in a batch, the logic failed on a record in a way a retry
// may fix; it is processed again on its own, with retries.
var errRetryAlone = errors.New("retry alone")

// evaluate decides what a record does on state cur: a new state and
// outputs, or a dead-letter reason with the failure. It returns errAbandon
// when the effector stopped meanwhile. Without retry, a failure that a retry
// may fix returns errRetryAlone after one attempt.
func (e *effector) evaluate(d delivery, cur []byte, retry bool) (state []byte, outs []output, reason string, failure error) {
	k := e.kind
	if reason, failure := e.screen(d); reason != "" {
		return nil, nil, reason, failure
	}
	switch {
	case d.err != nil:
		return nil, nil, reasonDecode, d.err
	case !k.accepts(d.rec.ContentType):
		return nil, nil, reasonContentType, fmt.Errorf("kind %s does not accept payloads of type %s (accepts %s)", k.name, d.rec.ContentType, strings.Join(k.accept, ", "))
	case k.maxPayload > 0 && len(d.rec.Payload) > k.maxPayload:
		return nil, nil, reasonOversize, fmt.Errorf("payload of %d bytes exceeds the %d bytes kind %s accepts", len(d.rec.Payload), k.maxPayload, k.name)
	case d.delivered > uint64(k.maxDeliveries):
		return nil, nil, reasonRedelivered, fmt.Errorf("delivered %d times without completing (limit %d): the record may crash its node", d.delivered, k.maxDeliveries)
	}
	for attempt := 1; ; attempt++ {
		state, outs, err := e.attempt(d, cur)
		if err == nil {
			return state, outs, "", nil
		}
		if e.ctx.Err() != nil {
			return nil, nil, "", errAbandon
		}
		var pe *PanicError
		var payload *records.PayloadError
		switch {
		case errors.Is(err, ErrCancelled):
			return nil, nil, reasonCancelled, err
		case errors.As(err, &pe):
			e.logger().Error("logic panicked", "record", d.rec.ID, "panic", pe.Value, "stack", string(pe.Stack))
			return nil, nil, reasonPanic, err
		case errors.As(err, &payload):
			return nil, nil, reasonDecode, err
		case outcomeReason(err) != "":
			return nil, nil, outcomeReason(err), err
		case IsPermanent(err):
			return nil, nil, reasonRejected, err
		case attempt >= k.retry.Attempts:
			return nil, nil, reasonFailed, fmt.Errorf("failed %d attempts: %w", attempt, err)
		case !retry:
			// In a batch: the record is retried on its own, with backoff
			// (one attempt more than Retry.Attempts in all, at most).
			e.node.metrics.retries.WithLabelValues(k.name).Inc()
			return nil, nil, "", errRetryAlone
		}
		e.node.metrics.retries.WithLabelValues(k.name).Inc()
		wait := k.retry.Delay(attempt)
		e.logger().Debug("logic failed; retrying", "record", d.rec.ID, "attempt", attempt, "in", wait, "err", err)
		_ = d.msg.InProgress()
		if !sleep(e.ctx, wait) {
			return nil, nil, "", errAbandon
		}
	}
}

// attempt runs the logic once, turning a panic into a *PanicError. While it
// runs, the node's watchdog (checkSlow) may mark the state PROCESSING and
// extend the record's ack deadline.
func (e *effector) attempt(d delivery, cur []byte) (state []byte, outs []output, err error) {
	ctx, cancelCause := context.WithCancelCause(e.ctx)
	defer cancelCause(nil)
	if e.kind.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.kind.timeout)
		defer cancel()
	}
	c := e.newContext(ctx, d)

	now := time.Now()
	e.mu.Lock()
	e.handSince, e.handMsg, e.marked, e.lastProgress = now, d.msg, false, now
	e.handProcess, e.handCancel = d.rec.Process, cancelCause
	if upTo, ok := e.cancelled[d.rec.Process]; ok && d.rec.Process != "" && d.seq < upTo {
		cancelCause(ErrCancelled)
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.handSince, e.handMsg = time.Time{}, nil
		e.handProcess, e.handCancel = "", nil
		marking := e.marking
		e.marking = nil
		e.mu.Unlock()
		if marking != nil {
			<-marking // a PROCESSING write in flight owns doc and rev until it ends
		}
	}()
	defer func() {
		if err != nil && errors.Is(context.Cause(ctx), ErrCancelled) && !errors.Is(err, ErrCancelled) {
			err = fmt.Errorf("%w: %w", ErrCancelled, err)
		}
	}()

	defer func() {
		if v := recover(); v != nil {
			state, outs, err = nil, nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	if intercept := e.node.opts.Intercept; intercept != nil {
		err = intercept(c, func(c *Context) (err error) { state, err = e.kind.run(c, cur); return err })
	} else {
		state, err = e.kind.run(c, cur)
	}
	if err = c.outcome(err); err != nil {
		return nil, nil, err
	}
	return state, c.outs, nil
}
