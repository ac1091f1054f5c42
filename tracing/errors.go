package tracing

import "errors"

// ErrInvalid is matched by every error [Setup] returns for a bad setting.
var ErrInvalid = errors.New("tracing: invalid setting")
