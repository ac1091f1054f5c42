package bus

import "errors"

// ErrInvalidConfig is wrapped by every error [Config.Validate] returns.
var ErrInvalidConfig = errors.New("bus: invalid config")

// ErrStoreLocked: the store directory of an embedded server is in use by
// another embedded server (see [LockFile]). Two servers on one store would
// corrupt it.
var ErrStoreLocked = errors.New("bus: store directory locked")

// ErrAuth: the NATS server refused the connection's credentials
// (authorization violation, expired or revoked). [Connect] returns it at
// once instead of retrying until its timeout.
var ErrAuth = errors.New("bus: nats refused the credentials")

// ErrTLS: the TLS handshake with the NATS server failed for a reason
// retrying cannot fix (the server's certificate is not trusted or not for
// its address, the server requires TLS or refuses it). [Connect] returns it
// at once instead of retrying until its timeout.
var ErrTLS = errors.New("bus: nats TLS handshake failed")
