package core

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/retry"
)

// RunOption adjusts [Run].
type RunOption func(*runConfig) error

type runConfig struct {
	timeout time.Duration
	op      string
}

// Timeout bounds the run: past d the logic's context is cancelled and Run
// returns a CodeTimeout error. d must be > 0.
func Timeout(d time.Duration) RunOption {
	return func(c *runConfig) error {
		if d <= 0 {
			return Errorf(CodeInvalid, "run", "timeout must be > 0, got %v", d)
		}
		c.timeout = d
		return nil
	}
}

// Named sets the operation name errors carry (default "run").
func Named(op string) RunOption {
	return func(c *runConfig) error {
		if op == "" {
			return Errorf(CodeInvalid, "run", "operation name must not be empty")
		}
		c.op = op
		return nil
	}
}

// errRunTimeout is the cause of a run's context when its time limit passes.
var errRunTimeout = errors.New("run time limit passed")

// Run is the run bridge: it runs fn with scope in its context (reach it with
// [From]) and returns fn's result, or an *Error for every failure, keeping the
// cause for errors.Is/As:
//
//   - fn returns an *Error: returned as is;
//   - fn returns another error: CodeFailed (CodeTimeout or CodeCancelled when
//     the error comes from the run's context ending);
//   - fn panics: CodePanic, cause a *PanicError with the value and stack;
//   - the time limit passes: CodeTimeout, at once, even if fn ignores its context;
//   - ctx ends: CodeCancelled (CodeTimeout when its deadline passed), at
//     once, cause context.Cause(ctx).
//
// fn runs on its own goroutine so that Run returns at once on timeout or
// cancellation; fn should honour its context so that it stops too.
func Run[T any](ctx context.Context, scope *Scope, fn func(context.Context) (T, error), opts ...RunOption) (T, error) {
	var zero T
	cfg := runConfig{op: "run"}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return zero, err
		}
	}
	if fn == nil {
		return zero, Errorf(CodeInvalid, cfg.op, "no function to run")
	}
	if ctx.Err() != nil {
		return zero, classify(cfg.op, ctx, ctx, context.Cause(ctx))
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	if cfg.timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, cfg.timeout, errRunTimeout)
		defer stop()
	}
	if scope != nil {
		runCtx = With(runCtx, scope)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: E(CodePanic, cfg.op, &PanicError{Value: p, Stack: debug.Stack()})}
			}
			done <- r
		}()
		r.v, r.err = fn(runCtx)
	}()
	select {
	case r := <-done:
		if r.err == nil {
			return r.v, nil
		}
		return zero, classify(cfg.op, runCtx, ctx, r.err)
	case <-runCtx.Done():
		return zero, classify(cfg.op, runCtx, ctx, context.Cause(runCtx))
	}
}

// classify turns err into an *Error with the right code.
func classify(op string, runCtx, parent context.Context, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		return E(CodeTimeout, op, joinCause(err, context.Cause(parent)))
	case parent.Err() != nil:
		return E(CodeCancelled, op, joinCause(err, context.Cause(parent)))
	case errors.Is(context.Cause(runCtx), errRunTimeout):
		return E(CodeTimeout, op, joinCause(err, errRunTimeout))
	case errors.Is(err, context.DeadlineExceeded):
		return E(CodeTimeout, op, err)
	case errors.Is(err, context.Canceled):
		return E(CodeCancelled, op, err)
	}
	return E(CodeFailed, op, err)
}

func joinCause(err, cause error) error {
	if err == nil || errors.Is(err, cause) {
		return cause
	}
	if cause == nil {
		return err
	}
	return fmt.Errorf("%w (%w)", err, cause)
}

// Permanent reports whether retrying cannot fix err: it is
// [retry.IsPermanent], so it sees an error marked by any package
// (actor.Permanent, graph.Permanent, retry.Permanent) and an [*Error] whose
// code retrying cannot fix ([Error.Permanent]).
func Permanent(err error) bool { return retry.IsPermanent(err) }

// Wrap returns kind k whose logic runs through [Middleware] with the
// services, as seen by k's [Scope] under perms.
func Wrap[S any](svc *Services, perms Permissions, k actor.Kind[S]) (actor.Kind[S], error) {
	if k.Logic == nil {
		return k, Errorf(CodeInvalid, "core.wrap", "kind %q has no logic", k.Name)
	}
	return k.With(Middleware[S](svc, perms, k.Name)), nil
}

// Middleware returns the [actor.Middleware] that runs the logic of kind with
// the services, as seen by the kind's [Scope] under perms, in its context:
// the logic reaches them with core.From(ctx) on its *actor.Context. Each
// attempt gets a [Tally] (TallyOf) summing the tokens of its LLM requests;
// Services.Metrics counts them per kind. Failures become *Error values;
// those retrying cannot fix ([Permanent]) send the record to dead letters
// at once (the node sees them with actor.IsPermanent), others are retried
// by the node.
func Middleware[S any](svc *Services, perms Permissions, kind string) actor.Middleware[S] {
	scope := svc.Scope(kind, perms)
	return func(next actor.Logic[S]) actor.Logic[S] {
		return func(c *actor.Context, s S) (S, error) {
			tally := &Tally{}
			inner := c.WithContext(WithTally(With(c, scope), tally))
			out, err := next(inner, s)
			if u := tally.Usage(); u != (Usage{}) {
				c.Logger().Debug("llm tokens of the record", "input", u.Input, "output", u.Output)
			}
			if err == nil {
				return out, nil
			}
			if Permanent(err) {
				return out, err
			}
			return out, classify("kind "+kind, inner, c, err)
		}
	}
}
