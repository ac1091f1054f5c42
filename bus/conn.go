package bus

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config configures a connection and the streams and buckets it provisions.
// The zero value is valid: an embedded server on 127.0.0.1:4222 storing in
// ./data, prefix "ea", one replica.
type Config struct {
	// URL is one or more comma-separated NATS URLs. Empty starts an embedded
	// server (see Listen, StoreDir, SyncAlways).
	URL string
	// Listen is the client address of the embedded server. Default
	// 127.0.0.1:4222; port 0 picks a free port.
	Listen string
	// StoreDir is the JetStream store directory of the embedded server.
	// Default ./data.
	StoreDir string
	// SyncAlways makes the embedded server fsync every write (see
	// [ServerConfig.SyncAlways]).
	SyncAlways bool
	// ServerConfigFile is the embedded server's nats-server configuration
	// file: users, accounts, permissions, TLS (see [ServerConfig.ConfigFile]
	// and deploy/nats). The connection then authenticates with Options like
	// any client.
	ServerConfigFile string
	// Prefix is the subject prefix. Default "ea".
	Prefix string
	// Name is the client connection name shown by the server. Default "ea".
	Name string
	// Replicas is the replica count of streams and buckets; use 3 on a
	// cluster. 0 keeps what a provisioned deployment has (the mailbox
	// stream's count), and is 1 when nothing is provisioned yet: a process
	// that does not say (a supervisor, a client) never changes it.
	Replicas int
	// DuplicateWindow is how long the records stream remembers record ids to
	// drop duplicates. Default 2 minutes.
	DuplicateWindow time.Duration
	// MaxAge bounds how long records and dead letters are kept, when
	// Retention does not say (it sets Retention.LogMaxAge and DeadMaxAge
	// where they are 0). Prefer Retention.
	MaxAge time.Duration
	// Retention bounds the age and size of the record log and of the dead
	// letters; see [Retention]. The zero value keeps what the streams have.
	Retention Retention
	// MaxConsumers is the most consumers the mailbox and outbox streams
	// allow (the runtime needs one per kind and partition; the rest are
	// readers'). Default 1,000,000.
	MaxConsumers int
	// Partitions is the number of mailbox partitions: every effector belongs
	// to partition hash(kind, id) mod Partitions forever, and nodes own
	// partitions, not effectors. Fixed at provisioning: connecting with
	// another count to a provisioned deployment is an error (changing it is
	// a migration). 0 takes the count of a provisioned deployment (its
	// mailbox stream), and is 64 ([DefaultPartitions]) when nothing is
	// provisioned yet.
	Partitions int
	// Groups is the number of stream groups (docs/layout.md): with 1 every
	// mailbox is in one stream (EA_MBOX) and every state document in one
	// bucket (ea_state); with G > 1 partition p's mailboxes are in stream
	// group p mod G, each group a mailbox stream and a state bucket of its
	// own, so that their leaders can be on different servers. G > 1 needs
	// the account subject mapping [Names.MailboxMapping] on every server
	// (an embedded server gets it from the runtime). Fixed at provisioning
	// like Partitions; 0 takes the count of a provisioned deployment, and is
	// 1 when nothing is provisioned yet.
	Groups int
	// StateHistory is how many revisions of each state document are kept
	// (1-64). Default 5.
	StateHistory int
	// ConnectTimeout bounds the first connection. Default 10s.
	ConnectTimeout time.Duration
	// Logger receives connection events. Default slog.Default().
	Logger *slog.Logger
	// Options are passed to nats.Connect after the runtime's own (name,
	// reconnects forever, handlers), so they may override them (all but the
	// closed handler, which [Conn.Lost] needs): credentials
	// (nats.UserCredentials, nats.NkeyOptionFromSeed, nats.UserInfo,
	// nats.Token), TLS (nats.RootCAs, nats.ClientCert, nats.Secure), an
	// inbox prefix. They apply to the embedded server's connection too.
	Options []nats.Option
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Name == "" {
		c.Name = c.Prefix
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = 1_000_000
	}
	if c.StateHistory == 0 {
		c.StateHistory = 5
	}
	if c.MaxAge > 0 && c.Retention.LogMaxAge == 0 {
		c.Retention.LogMaxAge = c.MaxAge
	}
	if c.MaxAge > 0 && c.Retention.DeadMaxAge == 0 {
		c.Retention.DeadMaxAge = c.MaxAge
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := NewNames(c.Prefix); err != nil {
		return err
	}
	if c.URL == "" && c.Listen != "" {
		if _, _, err := parseListen(c.Listen); err != nil {
			return err
		}
	}
	switch {
	case c.Replicas < 0 || c.Replicas > 5:
		return fmtInvalid("replicas %d: must be 1-5 (0: keep what is provisioned)", c.Replicas)
	case c.DuplicateWindow < 0:
		return fmtInvalid("duplicate window %s: must be positive", c.DuplicateWindow)
	case c.MaxAge < 0:
		return fmtInvalid("max age %s: must be 0 (forever) or positive", c.MaxAge)
	case c.MaxAge > 0 && c.MaxAge < c.DuplicateWindow:
		return fmtInvalid("max age %s: must not be shorter than the duplicate window %s", c.MaxAge, c.DuplicateWindow)
	case c.Retention.validate(c.DuplicateWindow) != nil:
		return c.Retention.validate(c.DuplicateWindow)
	case c.MaxConsumers < 1:
		return fmtInvalid("max consumers %d: must be positive", c.MaxConsumers)
	case c.StateHistory < 1 || c.StateHistory > 64:
		return fmtInvalid("state history %d: must be 1-64 (a KV key keeps at most 64 revisions)", c.StateHistory)
	case c.Partitions < 0 || c.Partitions > MaxPartitions:
		return fmtInvalid("partitions %d: must be 1-%d (0: what is provisioned)", c.Partitions, MaxPartitions)
	case c.Groups < 0 || c.Groups > MaxGroups:
		return fmtInvalid("stream groups %d: must be 1-%d (0: what is provisioned)", c.Groups, MaxGroups)
	case c.Partitions > 0 && c.Groups > c.Partitions:
		return fmtInvalid("stream groups %d: more than the %d partitions (each group holds at least one partition)", c.Groups, c.Partitions)
	case c.ConnectTimeout < 0:
		return fmtInvalid("connect timeout %s: must be positive", c.ConnectTimeout)
	}
	for i, o := range c.Options {
		if o == nil {
			return fmtInvalid("Options[%d] is nil", i)
		}
	}
	return nil
}

func fmtInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Conn is a connection to NATS with JetStream, and the embedded server when it
// started one. It is safe for concurrent use.
type Conn struct {
	// nc is the core NATS connection and js the JetStream API on it; set
	// once by Connect, read through NATS and JetStream.
	nc *nats.Conn
	js jetstream.JetStream

	names  Names
	cfg    Config
	server *Server
	log    *slog.Logger
	url    string // the servers Connect dialled (see Side)

	closing atomic.Bool   // Close was called: a closed connection is expected
	closed  chan struct{} // closed by the connection's closed handler
	lost    chan struct{} // closed when NATS closed it for good without Close
	lostErr error         // why; written before lost is closed, read after
	// disconnects counts the times the connection went down (Disconnects).
	disconnects atomic.Uint64
	// drop is closed when the connection next goes down, or a stream's
	// leader is elected once FollowElections was called, then replaced (see
	// Dropped).
	drop atomic.Pointer[chan struct{}]
	// elections is the advisory subscription of FollowElections, made once.
	elections     sync.Once
	electionsErr  error
	electionsSeen atomic.Uint64 // advisories received

	// The configuration left these at 0: Provision takes them from the
	// provisioned streams (see Adopt).
	unsetReplicas, unsetPartitions, unsetGroups bool
}

// NATS returns the core NATS connection: publish, subscribe and make
// requests on it. It is shared by every user of c; [Conn.Close] closes it.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the JetStream API on the connection.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// Connect connects to NATS as cfg says, starting an embedded server when
// cfg.URL is empty. It keeps trying until cfg.ConnectTimeout or ctx ends. The
// connection then reconnects forever on its own; records published while it is
// down fail with an error rather than being lost.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	names, _ := NewNames(cfg.Prefix)
	c := &Conn{names: names, cfg: cfg, log: cfg.Logger, closed: make(chan struct{}), lost: make(chan struct{})}
	url := cfg.URL
	if url == "" {
		srv, err := StartServer(ServerConfig{Listen: cfg.Listen, StoreDir: cfg.StoreDir, SyncAlways: cfg.SyncAlways, Logger: cfg.Logger, ConfigFile: cfg.ServerConfigFile})
		if err != nil {
			return nil, err
		}
		c.server = srv
		url = srv.ClientURL()
		c.log.Info("embedded nats-server started", "url", url, "store", srv.StoreDir(), "sync_always", cfg.SyncAlways)
	}
	first := make(chan struct{})
	c.drop.Store(&first)
	c.url = url
	nc, err := dial(ctx, url, cfg, c.onClosed, c.down)
	if err != nil {
		c.shutdownServer()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		c.shutdownServer()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	// Until Provision or Adopt reads what is provisioned (a client that
	// only sends may not read streams), the defaults.
	c.unsetReplicas, c.unsetPartitions, c.unsetGroups = cfg.Replicas == 0, cfg.Partitions == 0, cfg.Groups == 0
	c.cfg.Replicas = cmp.Or(c.cfg.Replicas, 1)
	c.cfg.Partitions = cmp.Or(c.cfg.Partitions, DefaultPartitions)
	c.cfg.Groups = cmp.Or(c.cfg.Groups, 1)
	c.setLayout()
	return c, nil
}

// Adopt sets the replica, partition and stream group counts the
// configuration left at 0 to the provisioned deployment's (its mailbox
// stream, or the stream groups' streams), keeping the defaults (1,
// [DefaultPartitions] and 1) when there is none or it cannot be read; then
// the names' counts. [Conn.Provision] calls it first; a client that does
// not provision but reads stored mailbox subjects or state documents (a
// CLI, a log reader: [Names.StoredMailbox], [Names.RefOf],
// [Names.StateBucketFor]) calls it once after Connect, or its names assume
// 64 partitions and one stream group whatever the deployment has. It needs
// permission to read the mailbox streams' info; without it the defaults
// stay.
func (c *Conn) Adopt(ctx context.Context) {
	if c.unsetReplicas || c.unsetPartitions || c.unsetGroups {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		g, p, found, err := c.provisionedLayout(ctx)
		if err != nil {
			c.log.Debug("cannot read the provisioned mailbox layout; using the defaults", "err", err)
		}
		if found {
			if c.unsetPartitions {
				c.cfg.Partitions = p
			}
			if c.unsetGroups {
				c.cfg.Groups = g
			}
			c.setLayout()
			if s, err := c.JetStream().Stream(ctx, c.names.MailboxStreamOf(0)); err == nil && c.unsetReplicas && s.CachedInfo().Config.Replicas > 0 {
				c.cfg.Replicas = s.CachedInfo().Config.Replicas
			}
		}
	}
	c.setLayout()
}

// setLayout sets the names' partition and group counts to the
// configuration's. A group count above the partition count (possible only
// when the partitions were taken from a deployment) is left to
// [Conn.Provision] to refuse.
func (c *Conn) setLayout() {
	n := c.names
	n, _ = n.WithGroups(1)
	n, _ = n.WithPartitions(c.cfg.Partitions)
	if gn, err := n.WithGroups(c.cfg.Groups); err == nil {
		n = gn
	}
	c.names = n
}

// transformDest is the destination of sc's subject transform, "" if none.
func transformDest(sc jetstream.StreamConfig) string {
	if sc.SubjectTransform == nil {
		return ""
	}
	return sc.SubjectTransform.Destination
}

// onClosed is the connection's closed handler: nats.go calls it once, when
// the connection is closed for good, by Close or by NATS.
func (c *Conn) onClosed(nc *nats.Conn) {
	if !c.closing.Load() {
		last := nc.LastError()
		if last == nil {
			last = errors.New("no error given")
		}
		c.lostErr = fmt.Errorf("%w (%v); the process must open a new one or exit", ErrConnLost, last)
		c.log.Error("nats closed the connection for good; it will not reconnect", "err", last)
		close(c.lost)
	}
	close(c.closed)
}

func dial(ctx context.Context, url string, cfg Config, closed nats.ConnHandler, down func()) (*nats.Conn, error) {
	log := cfg.Logger
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.Timeout(2 * time.Second),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", RedactURL(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("nats async error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("nats async error", "err", err)
		}),
	}
	// The disconnect and closed handlers come after cfg.Options: Conn needs
	// them (see Disconnects and Lost).
	opts = append(opts, cfg.Options...)
	opts = append(opts, nats.ClosedHandler(closed), nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
		down()
		if err != nil {
			log.Warn("nats disconnected", "err", err)
		}
	}))
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	wait := 100 * time.Millisecond
	shown := RedactURL(url)
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			return nc, nil
		}
		if authFailed(err) {
			// Retrying cannot fix wrong credentials: say so at once.
			return nil, fmt.Errorf("%w: connect to nats at %s: %w (check the credentials: --creds, --nkey, --user with EA_PASSWORD or --password-file, EA_TOKEN or --token-file, or those in the URL)", ErrAuth, shown, err)
		}
		if tlsFailed(err) {
			return nil, fmt.Errorf("%w: connect to nats at %s: %w (check --tls-ca, --tls-cert and --tls-key, and that the server's certificate names the host in the URL)", ErrTLS, shown, err)
		}
		log.Warn("cannot reach nats yet", "url", shown, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to nats at %s: %w (is the server running? set --nats, or leave it empty to embed one)", shown, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Side opens another connection to the servers c is connected to, with the
// same options (credentials, TLS), named after c's with "-" and what, for
// traffic that must not queue behind c's: a node's heartbeats, which must
// not wait behind its records and state writes nor on its reconnects. It
// reconnects forever like c, and its disconnects are logged (with
// connection=what), not counted in [Conn.Disconnects] or [Conn.Dropped].
// The caller closes it; [Conn.Close] does not.
func (c *Conn) Side(ctx context.Context, what string) (*nats.Conn, error) {
	if c.url == "" {
		return nil, fmt.Errorf("%w: a side connection needs a Conn made by Connect", ErrInvalidConfig)
	}
	cfg := c.cfg
	cfg.Name = c.cfg.Name + "-" + what
	cfg.Logger = c.log.With("connection", what)
	return dial(ctx, c.url, cfg, func(*nats.Conn) {}, func() {})
}

// Names returns the subject, stream and bucket names of this connection.
func (c *Conn) Names() Names { return c.names }

// Config returns the configuration in effect, defaults filled in.
func (c *Conn) Config() Config { return c.cfg }

// Server returns the embedded server, or nil when connected by URL.
func (c *Conn) Server() *Server { return c.server }

// Connected reports whether the connection is up right now.
func (c *Conn) Connected() bool { return c.NATS() != nil && c.NATS().IsConnected() }

// Connection states, as [Conn.State] reports them.
const (
	StateConnected    = "connected"    // up
	StateReconnecting = "reconnecting" // down; nats.go is reconnecting on its own
	StateClosed       = "closed"       // closed for good: by Close, or lost (see Lost)
)

// ConnStates lists every value [Conn.State] returns.
func ConnStates() []string { return []string{StateConnected, StateReconnecting, StateClosed} }

// State says what the connection is doing now: [StateConnected],
// [StateReconnecting] or [StateClosed].
func (c *Conn) State() string {
	switch {
	case c.NATS() == nil || c.NATS().IsClosed():
		return StateClosed
	case c.NATS().IsConnected():
		return StateConnected
	default:
		return StateReconnecting
	}
}

// Lost is closed when NATS has closed the connection for good without
// [Conn.Close] being called: nats.go will not reconnect, so nothing that
// uses the connection can work again (see [ErrConnLost]). Long-running work
// should stop then, and the process exit non-zero or connect anew.
func (c *Conn) Lost() <-chan struct{} { return c.lost }

// down counts a disconnect and closes the channel Dropped handed out.
func (c *Conn) down() {
	c.disconnects.Add(1)
	c.interrupt()
}

// interrupt closes the channel Dropped handed out, and hands out a new one.
func (c *Conn) interrupt() {
	next := make(chan struct{})
	if old := c.drop.Swap(&next); old != nil {
		close(*old)
	}
}

// FollowElections makes the channel [Conn.Dropped] hands out close, as at a
// disconnect, whenever JetStream elects a stream's leader
// ([Names.StreamLeaderElected], a stepped-down or dead leader's successor):
// a write sent to the old leader as it went may never be answered, not even
// with an error, and a caller waiting on Dropped sends it again at once
// rather than waiting out its timeout. [Conn.Disconnects] does not count
// elections. It needs permission to subscribe to the advisory subject
// (deploy/nats grants it to nodes); on a single server, where no leader is
// ever elected again, it costs nothing. Calling it again does nothing and
// returns the first call's error.
func (c *Conn) FollowElections() error {
	c.elections.Do(func() {
		if c.nc == nil {
			c.electionsErr = fmt.Errorf("%w: FollowElections needs a Conn made by Connect", ErrInvalidConfig)
			return
		}
		_, err := c.nc.Subscribe(c.names.StreamLeaderElected(), func(*nats.Msg) {
			c.electionsSeen.Add(1)
			c.interrupt()
		})
		if err != nil {
			c.electionsErr = fmt.Errorf("follow stream leader elections: %w", err)
		}
	})
	return c.electionsErr
}

// Elections returns how many stream leader elections the connection heard
// of since [Conn.FollowElections].
func (c *Conn) Elections() uint64 { return c.electionsSeen.Load() }

// Dropped returns a channel closed when the connection next goes down, or,
// after [Conn.FollowElections], when a stream's leader is next elected. A
// request whose answer had not come by then may not get it (an answer sent
// while the client is disconnected is lost; a leader that stepped down does
// not answer what it had not stored), so a caller waiting on it can ask
// again at once instead of waiting out its timeout.
func (c *Conn) Dropped() <-chan struct{} {
	if ch := c.drop.Load(); ch != nil {
		return *ch
	}
	return nil // never: a Conn not made by Connect
}

// Publisher returns a [Publisher] on the connection whose calls end with
// [ErrAckLost] when the connection goes down (or, after
// [Conn.FollowElections], a stream's leader is elected) before their
// acknowledgement came (see [Conn.Dropped]). A timeout of 0 is [DefaultPublishTimeout].
func (c *Conn) Publisher(timeout time.Duration) (*Publisher, error) {
	p, err := NewPublisher(c.nc, timeout)
	if err != nil {
		return nil, err
	}
	p.dropped = c.Dropped
	return p, nil
}

// Disconnects returns how many times the connection went down so far
// (reconnected since, or not). Reading it is cheap: code that must not act
// on what it learnt over an earlier connection compares two readings.
func (c *Conn) Disconnects() uint64 { return c.disconnects.Load() }

// Err is nil while the connection is usable or reconnecting, and an error
// wrapping [ErrConnLost], with the server's last error, once [Conn.Lost] is
// closed.
func (c *Conn) Err() error {
	select {
	case <-c.lost:
		return c.lostErr
	default:
		return nil
	}
}

// ClientURL returns the URL of the server this connection uses, its
// password or token redacted (see [RedactURL]).
func (c *Conn) ClientURL() string {
	if c.server != nil {
		return c.server.ClientURL()
	}
	return RedactURL(c.NATS().ConnectedUrl())
}

// authFailed reports whether the server refused the connection's
// credentials.
func authFailed(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// tlsFailed reports whether the TLS handshake failed in a way retrying
// cannot fix.
func tlsFailed(err error) bool {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError // the server refused our certificate (QUIC)
	var op *net.OpError      // ... over TCP: a "remote error" holding the alert
	if errors.As(err, &op) && op.Op == "remote error" || strings.Contains(err.Error(), "remote error: tls: ") {
		return true
	}
	return errors.As(err, &alert) || errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// Close drains the connection (pending publishes are flushed, subscriptions
// finish what they hold) and stops the embedded server, if any.
func (c *Conn) Close() error {
	var err error
	c.closing.Store(true)
	if c.NATS() != nil && !c.NATS().IsClosed() {
		if err = c.NATS().Drain(); err == nil {
			select {
			case <-c.closed:
			case <-time.After(10 * time.Second):
				err = errors.New("drain nats connection: timed out after 10s")
				c.NATS().Close()
			}
		} else {
			c.NATS().Close()
			err = fmt.Errorf("drain nats connection: %w (closed without draining)", err)
		}
	}
	c.shutdownServer()
	return err
}

func (c *Conn) shutdownServer() {
	if c.server != nil {
		c.server.Shutdown()
		c.log.Info("embedded nats-server stopped")
	}
}
