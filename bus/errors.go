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

// ErrServerVersion: the NATS server is older than the runtime needs
// ([MinServerVersion]): provisioning refuses it rather than leave nodes that
// never become ready.
var ErrServerVersion = errors.New("bus: nats-server too old")

// ErrConnLost: NATS closed the connection for good while the runtime had not
// asked it to. nats.go does not reconnect after that: the server answered an
// error it treats as final (for instance "maximum control line exceeded"),
// or reconnecting gave up. [Conn.Lost] is closed then and [Conn.Err] wraps
// this with the server's last error; a process should exit non-zero so that
// its supervisor (systemd, Kubernetes) starts it again.
var ErrConnLost = errors.New("bus: nats closed the connection for good")
