package actor

// Middleware wraps a kind's logic with behaviour that cuts across kinds
// (services in the context, tracing, metrics, permission checks), as
// watermill's HandlerMiddleware wraps a handler. It gets the next logic and
// returns logic that calls it. To hand the next logic a derived
// context.Context, call it with [Context.WithContext]: outputs sent through
// either Context are held for the same attempt.
//
//	func timed[S any](next actor.Logic[S]) actor.Logic[S] {
//		return func(c *actor.Context, s S) (S, error) {
//			start := time.Now()
//			defer func() { c.Logger().Debug("logic", "took", time.Since(start)) }()
//			return next(c, s)
//		}
//	}
type Middleware[S any] func(next Logic[S]) Logic[S]

// With returns k whose logic runs through mw: the first middleware is the
// outermost, so it sees the record first and the result last. Nil
// middleware is skipped; a kind without Logic stays without (the node
// refuses it when it is hosted).
func (k Kind[S]) With(mw ...Middleware[S]) Kind[S] {
	if k.Logic == nil {
		return k
	}
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			k.Logic = mw[i](k.Logic)
		}
	}
	return k
}
