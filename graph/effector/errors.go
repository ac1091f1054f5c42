package effector

import "errors"

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalid: Kind was given a graph or kind it cannot host.
	ErrInvalid = errors.New("invalid graph effector")
	// ErrNoRecord: a helper of this package was called outside a graph run by
	// an effector.
	ErrNoRecord = errors.New("not in a graph run by an effector")
	// ErrWaiting: a record other than a resume reached a graph effector
	// that waits for input (InputKind); it is dead-lettered.
	ErrWaiting = errors.New("graph effector is waiting for input")
	// ErrNotWaiting: a resume record reached a graph effector that waits
	// for nothing (InputKind); it is dead-lettered.
	ErrNotWaiting = errors.New("graph effector is not waiting for input")
)
