package scale

import "errors"

// Errors.
var (
	// ErrInvalid: an argument is out of range.
	ErrInvalid = errors.New("scale: invalid argument")
	// ErrExited: a child process exited before it was asked to.
	ErrExited = errors.New("scale: process exited")
)
