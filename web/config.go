package web

import (
	"log/slog"
	"net"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/tracing"
)

// DefaultAddr is where the gateway listens unless told otherwise: loopback
// only, like the metrics endpoints.
const DefaultAddr = "127.0.0.1:9466"

// Defaults of [Config]'s limits.
const (
	DefaultMaxFrame         = 1 << 20 // 1 MiB: a record of the server's default max_payload, as JSON
	DefaultSendBuffer       = 8 << 20 // 8 MiB of frames waiting for one client
	DefaultSlowReader       = 10 * time.Second
	DefaultMaxSubscriptions = 64
	DefaultAuthTimeout      = 10 * time.Second
	DefaultPollInterval     = 250 * time.Millisecond
	DefaultRequestTimeout   = 30 * time.Second
	DefaultUsersReload      = 2 * time.Second
)

// Config configures a [Gateway]. The zero value serves on [DefaultAddr]
// with no token and the default limits.
type Config struct {
	// Addr is the listen address of [Gateway.Run] (host:port). A host that
	// is not loopback (127.0.0.0/8, ::1, localhost) needs a Token.
	Addr string
	// Token is a shared bearer token, the identity [AdminName] with
	// [RoleAdmin]. Clients present a token as the header
	// "Authorization: Bearer <token>" on the upgrade request, or in a first
	// frame {"type":"auth","token":"<token>"} (what browsers do).
	Token string
	// UsersFile is the path of a users file (see [ParseUsers]): one line
	// per token, "<name> <role> sha256:<hex>", mapping the SHA-256 of a
	// token to an identity. The gateway sets EA-Owner to the identity's
	// name on everything it sends, creates and starts, and a user sees only
	// what carries its name. The file is read again every UsersReload when
	// it changed: a removed line revokes its token, and connections that
	// used it are closed (4401). With neither Token nor UsersFile the
	// gateway has no authentication, allowed only on loopback addresses.
	UsersFile string
	// UsersReload is how often UsersFile is checked for changes.
	UsersReload time.Duration
	// Origins are extra host patterns (path.Match syntax, e.g.
	// "app.example.com", "*.example.com", "localhost:5173") whose pages may
	// open the WebSocket. A pattern is matched, case-insensitively, against
	// the host of the Origin header with its port when it has one: a
	// pattern without a port allows only the default port ("localhost"
	// does not allow http://localhost:5173; write "localhost:5173" or
	// "localhost:*"), and "*.example.com" does not allow the bare domain
	// example.com (list it too). The gateway's own host is always allowed;
	// requests without an Origin header (non-browser clients) are not
	// checked.
	Origins []string
	// MaxFrame is the largest frame a client may send, in bytes; a larger
	// one closes the connection with status 1009.
	MaxFrame int64
	// SendBuffer bounds the bytes of frames waiting to be written to one
	// client. Producers wait for room up to SlowReader, then the client is
	// disconnected (status 4408). One frame larger than the buffer is let
	// through when the buffer is empty.
	SendBuffer int
	// SlowReader is how long a frame may wait for room in the send buffer
	// before the client is disconnected (status 4408, delivered if the
	// client reads again within another SlowReader; a write blocked for
	// twice SlowReader closes the socket).
	SlowReader time.Duration
	// MaxSubscriptions bounds the subscriptions of one connection.
	MaxSubscriptions int
	// AuthTimeout is how long a client without an Authorization header has
	// to send its auth frame.
	AuthTimeout time.Duration
	// PollInterval is how often a "records" subscription (a process or an
	// effector log, read through the record store) looks for new records.
	PollInterval time.Duration
	// RequestTimeout bounds the work of one request frame.
	RequestTimeout time.Duration
	// Tracer, when set, traces every send: a producer span "gateway send",
	// child of the frame's traceparent when it has one, is the parent of
	// the record stored. Nil: tracing off (a given traceparent is still
	// carried unchanged).
	Tracer *tracing.Tracer
	// Logger receives the gateway's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the gateway's metrics (ea_gateway_*). Nil: not
	// registered.
	Registerer prometheus.Registerer
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.SendBuffer == 0 {
		c.SendBuffer = DefaultSendBuffer
	}
	if c.SlowReader == 0 {
		c.SlowReader = DefaultSlowReader
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.UsersReload == 0 {
		c.UsersReload = DefaultUsersReload
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks c (with defaults applied to zero fields): the address
// parses, a non-loopback address has a token, limits are positive.
func (c Config) Validate() error {
	c = c.withDefaults()
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return invalidf("addr %q: want host:port such as %s: %v", c.Addr, DefaultAddr, err)
	}
	if !IsLoopback(host) && c.Token == "" && c.UsersFile == "" {
		return invalidf("addr %q is not a loopback address: set a users file (--gateway-users) or a token (--gateway-token-file or EA_GATEWAY_TOKEN) before serving the gateway beyond this machine", c.Addr)
	}
	if len(c.Token) > MaxToken {
		return invalidf("token: %d bytes, at most %d", len(c.Token), MaxToken)
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return invalidf("token contains white space: write the token alone (a trailing newline of a token file is removed)")
	}
	for _, o := range c.Origins {
		if strings.TrimSpace(o) == "" || strings.Contains(o, "://") {
			return invalidf("origin %q: want a host pattern such as app.example.com, *.example.com or localhost:5173, without scheme", o)
		}
		if _, err := path.Match(o, o); err != nil {
			return invalidf("origin %q: %v (path.Match syntax: * ? [a-z])", o, err)
		}
	}
	switch {
	case c.MaxFrame < 1024:
		return invalidf("max frame %d: must be at least 1024 bytes", c.MaxFrame)
	case c.SendBuffer < 1024:
		return invalidf("send buffer %d: must be at least 1024 bytes", c.SendBuffer)
	case c.SlowReader < 0, c.AuthTimeout < 0, c.PollInterval < 0, c.RequestTimeout < 0, c.UsersReload < 0:
		return invalidf("durations must be positive")
	case c.MaxSubscriptions < 0:
		return invalidf("max subscriptions %d: must be positive", c.MaxSubscriptions)
	}
	return nil
}

// IsLoopback reports whether host (of a host:port) only reaches this
// machine: localhost or a loopback IP. An empty host (all interfaces) is
// not.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
