package effector

import "errors"

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalid: Kind was given a graph or kind it cannot host.
	ErrInvalid = errors.New("invalid graph effector")
	// ErrNoRecord: a helper of this package was called outside a graph run by
	// an effector.
	ErrNoRecord = errors.New("not in a graph run by an effector")
)
