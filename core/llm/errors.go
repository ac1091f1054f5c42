package llm

import (
	"errors"
	"fmt"
)

// ErrConfig: the configuration is incomplete or malformed.
var ErrConfig = errors.New("llm: bad configuration")

// StatusError is an HTTP error the provider answered.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the provider's error message.
	Message string
	err     error
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("provider answered HTTP %d: %s", e.Status, e.Message)
}

// Unwrap returns the client library's error.
func (e *StatusError) Unwrap() error { return e.err }

// Transient reports whether retrying may help (429 or 5xx).
func (e *StatusError) Transient() bool { return e.Status == 429 || e.Status >= 500 }
