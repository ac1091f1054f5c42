package bus

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerConfig configures an embedded nats-server.
type ServerConfig struct {
	// Listen is the client address, host:port. Port 0 picks a free port.
	// Default 127.0.0.1:4222.
	Listen string
	// StoreDir is the JetStream store directory. Default ./data.
	StoreDir string
	// SyncAlways makes JetStream fsync every write before acknowledging it.
	// Off by default: then writes are synced every 2 minutes and an
	// acknowledged write can be lost on power loss (not on a process crash).
	SyncAlways bool
	// Logger receives the server's warnings and errors. Nil discards them.
	Logger *slog.Logger
	// Name is the server's name, which must be unique within a cluster.
	// Default "ea-embedded"; required when Cluster is set.
	Name string
	// Cluster makes the server join a NATS cluster; the zero value runs it
	// alone.
	Cluster ClusterConfig
	// ConfigFile is a nats-server configuration file (the format of
	// nats-server -c) for users, accounts, permissions, TLS and limits; see
	// deploy/nats for the runtime's roles. Listen, StoreDir, SyncAlways, Name
	// and Cluster win over what the file says of the same things; JetStream
	// is always on. Empty: no authentication, no TLS.
	ConfigFile string
	// Mappings are account subject mappings (source to destination, the
	// form of nats-server's "mappings" block) added to the server's global
	// account at start; stream groups need [Names.MailboxMapping] there (see
	// docs/layout.md). With accounts from ConfigFile, put them in the
	// account's "mappings" block instead.
	Mappings map[string]string
}

// ClusterConfig makes an embedded server one of a NATS cluster. JetStream
// then replicates streams and buckets across the servers (see
// [Config.Replicas]); a cluster of 3 keeps working when one server stops.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every server of the cluster.
	// Empty means no cluster: Listen and Routes must then be empty too.
	Name string
	// Listen is the address, host:port, on which the server accepts routes
	// from the other servers of the cluster. Port 0 picks a free port (see
	// [Server.ClusterAddr]). Required with Name.
	Listen string
	// Routes are the route URLs of other servers of the cluster, e.g.
	// nats-route://10.0.0.2:6222 (nats:// is accepted as well). Servers
	// tell each other about the rest, so each needs at least one route to
	// a server already running; listing all of them is the usual choice,
	// and a server's own address among them is ignored.
	Routes []string
}

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c ServerConfig) Validate() error {
	if c.Listen != "" {
		if _, _, err := parseListen(c.Listen); err != nil {
			return err
		}
	}
	if c.Name != "" && !validServerName(c.Name) {
		return fmtInvalid("server name %q: use letters, digits, '-', '_' and '.' only (no spaces)", c.Name)
	}
	cl := c.Cluster
	if cl.Name == "" {
		if cl.Listen != "" || len(cl.Routes) > 0 {
			return fmtInvalid("cluster listen address or routes given without a cluster name: set Cluster.Name (the same on every server of the cluster)")
		}
		return nil
	}
	switch {
	case !validServerName(cl.Name):
		return fmtInvalid("cluster name %q: use letters, digits, '-', '_' and '.' only (no spaces)", cl.Name)
	case c.Name == "":
		return fmtInvalid("cluster %q: set the server Name, unique within the cluster (JetStream tells servers apart by name)", cl.Name)
	case cl.Listen == "":
		return fmtInvalid("cluster %q: set Cluster.Listen, the host:port on which the server accepts routes (port 0 picks a free one)", cl.Name)
	}
	if _, _, err := parseListen(cl.Listen); err != nil {
		return fmtInvalid("cluster %q: Cluster.Listen %q: want host:port with port 0-65535, e.g. 127.0.0.1:6222", cl.Name, cl.Listen)
	}
	for _, r := range cl.Routes {
		if _, err := parseRoute(r); err != nil {
			return fmtInvalid("cluster %q: %s", cl.Name, err)
		}
	}
	return nil
}

// validServerName reports whether name is a usable server or cluster name.
func validServerName(name string) bool {
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return name != ""
}

// parseRoute parses a route URL, nats-route://host:port or nats://host:port.
func parseRoute(route string) (*url.URL, error) {
	u, err := url.Parse(route)
	if err != nil || (u.Scheme != "nats-route" && u.Scheme != "nats") || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("route %q: want nats-route://host:port", route)
	}
	if port, err := strconv.Atoi(u.Port()); err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("route %q: port must be 1-65535", route)
	}
	return u, nil
}

// Server is an embedded nats-server with JetStream.
type Server struct {
	srv *server.Server
	cfg ServerConfig
	// lock holds the store directory until Shutdown.
	lock     *storeLock
	lockOnce sync.Once
	auth     bool // clients must authenticate
}

// StartServer starts an embedded nats-server with JetStream and waits until it
// accepts clients.
//
// With cfg.Cluster set it joins the cluster; JetStream there needs a meta
// leader, elected once a majority of the servers run, before it serves
// requests: see [Server.JetStreamStatus].
func StartServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "ea-embedded"
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:4222"
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = "data"
	}
	host, port, err := parseListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	store, err := filepath.Abs(cfg.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("store dir %q: %w", cfg.StoreDir, err)
	}
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, fmt.Errorf("create store dir: %w (set --store to a writable directory)", err)
	}
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		if opts, err = server.ProcessConfigFile(cfg.ConfigFile); err != nil {
			return nil, fmt.Errorf("%w: server config %s: %w (check the file with nats-server -t -c %s)", ErrInvalidConfig, cfg.ConfigFile, err, cfg.ConfigFile)
		}
	}
	opts.ServerName, opts.Host, opts.Port = cfg.Name, host, port
	opts.JetStream, opts.StoreDir, opts.NoSigs = true, store, true
	opts.SyncAlways = opts.SyncAlways || cfg.SyncAlways
	if opts.MaxPayload == 0 {
		opts.MaxPayload = server.MAX_PAYLOAD_SIZE
	}
	authRequired := authConfigured(opts)
	lock, err := lockStore(store, cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cl := cfg.Cluster; cl.Name != "" {
		host, port, _ := parseListen(cl.Listen)
		if port == 0 {
			port = server.RANDOM_PORT
		}
		opts.Cluster = server.ClusterOpts{Name: cl.Name, Host: host, Port: port}
		for _, r := range cl.Routes {
			u, _ := parseRoute(r)
			u.Scheme = "nats-route"
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	// The server reports startup failures (address in use, JetStream cannot
	// start) only through its logger's Fatalf, so always install one and
	// stop waiting as soon as it fires.
	for src, dest := range cfg.Mappings {
		if err := srv.GlobalAccount().AddMapping(src, dest); err != nil {
			lock.release()
			return nil, fmt.Errorf("%w: subject mapping %q -> %q: %w", ErrInvalidConfig, src, dest, err)
		}
	}
	fatal := make(chan string, 1)
	srv.SetLoggerV2(serverLog{l: cfg.Logger, fatal: fatal}, false, false, false)
	go srv.Start()
	const readyTimeout = 15 * time.Second
	deadline := time.Now().Add(readyTimeout)
	for !srv.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-fatal:
			srv.Shutdown()
			srv.WaitForShutdown()
			lock.release()
			return nil, fmt.Errorf("embedded nats-server on %s: %s (check --listen and --store)", cfg.Listen, msg)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			srv.WaitForShutdown()
			lock.release()
			return nil, fmt.Errorf("embedded nats-server did not accept clients on %s within %s (is the address in use? set --listen)", cfg.Listen, readyTimeout)
		}
	}
	lock.note(srv.Addr().String())
	if !authRequired && !isLoopback(host) && cfg.Logger != nil {
		cfg.Logger.Warn("INSECURE: the embedded NATS server accepts clients on "+srv.Addr().String()+
			" without authentication: anyone who can reach it can read, write, purge and delete every record, state and stream."+
			" Give it users and permissions with --server-config (see deploy/nats in the effectors repository), or listen on 127.0.0.1",
			"listen", cfg.Listen)
	}
	return &Server{srv: srv, cfg: cfg, lock: lock, auth: authRequired}, nil
}

// authConfigured reports whether opts make clients authenticate: users,
// nkeys, a token, operators (JWT) or verified client certificates, and no
// user that connections without credentials become.
func authConfigured(o *server.Options) bool {
	if o.NoAuthUser != "" {
		return false
	}
	return o.Username != "" || o.Authorization != "" || len(o.Users) > 0 || len(o.Nkeys) > 0 ||
		len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.TLSVerify || o.AuthCallout != nil ||
		o.CustomClientAuthentication != nil
}

// isLoopback reports whether host, a listen host, only accepts local
// clients: a loopback address or localhost (empty and 0.0.0.0 listen on
// every interface).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AuthRequired reports whether clients must authenticate to the server (its
// ConfigFile gives users, nkeys, a token, operators or verified client
// certificates).
func (s *Server) AuthRequired() bool { return s.auth }

// parseListen checks a listen address, host:port with port 0-65535.
func parseListen(addr string) (host string, port int, err error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmtInvalid("listen address %q: want host:port, e.g. 127.0.0.1:4222", addr)
	}
	port, err = strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmtInvalid("listen address %q: port must be 0-65535", addr)
	}
	return host, port, nil
}

// ClientURL is the URL clients connect to, e.g. nats://127.0.0.1:4222.
func (s *Server) ClientURL() string { return s.srv.ClientURL() }

// Addr is the address clients connect to, host:port.
func (s *Server) Addr() string { return s.srv.Addr().String() }

// Name is the server's name.
func (s *Server) Name() string { return s.srv.Name() }

// ClusterAddr is the address, host:port, on which the server accepts routes
// from the other servers of its cluster; "" when it is not in a cluster.
func (s *Server) ClusterAddr() string {
	if s.cfg.Cluster.Name == "" {
		return ""
	}
	addr := s.srv.ClusterAddr()
	if addr == nil {
		return ""
	}
	return addr.String()
}

// JetStreamStatus is what a server knows of JetStream's readiness.
type JetStreamStatus struct {
	// Clustered is true when JetStream runs in a cluster.
	Clustered bool
	// Current is true when the server can serve JetStream requests: always
	// when standalone; in a cluster, once a meta leader is elected and this
	// server has caught up with it.
	Current bool
	// MetaLeader is true when this server leads the cluster's JetStream
	// meta group (which places streams and consumers).
	MetaLeader bool
	// Peers names the live JetStream servers of the cluster; only the meta
	// leader knows them, so it is empty on the others.
	Peers []string
}

// JetStreamStatus reports whether JetStream on this server is ready and, in a
// cluster, whether it leads the meta group. A cluster can create replicated
// streams once one server is MetaLeader with Peers listing enough servers.
func (s *Server) JetStreamStatus() JetStreamStatus {
	st := JetStreamStatus{Clustered: s.srv.JetStreamIsClustered(), Current: s.srv.JetStreamIsCurrent()}
	if st.Clustered {
		st.MetaLeader = s.srv.JetStreamIsLeader()
		if st.MetaLeader {
			st.Peers = s.srv.JetStreamClusterPeers()
		}
	}
	return st
}

// Healthy reports whether the server is fully up, the way its /healthz
// monitoring endpoint does: nil once it accepts clients and, with JetStream,
// every stream and consumer it holds is running and caught up; otherwise an
// error saying what is not.
func (s *Server) Healthy() error {
	h := s.srv.Healthz(nil)
	if h.Status == "ok" {
		return nil
	}
	if h.Error != "" {
		return fmt.Errorf("nats-server %s: %s", s.srv.Name(), h.Error)
	}
	return fmt.Errorf("nats-server %s: status %s", s.srv.Name(), h.Status)
}

// LeadsStream reports whether this server is the leader of the replicated
// stream named stream (a KV bucket is stream KV_<bucket>): the server that
// orders and acknowledges its writes. Always false when not in a cluster.
func (s *Server) LeadsStream(stream string) bool {
	return s.srv.JetStreamIsStreamLeader(s.srv.GlobalAccount().Name, stream)
}

// MapSubjects adds the account subject mapping source -> destination to the
// server's global account, as a "mappings" block in its configuration
// would. It applies to what is published from then on.
func (s *Server) MapSubjects(source, destination string) error {
	if err := s.srv.GlobalAccount().AddMapping(source, destination); err != nil {
		return fmt.Errorf("%w: subject mapping %q -> %q: %w", ErrInvalidConfig, source, destination, err)
	}
	return nil
}

// mapForClient adds the account subject mapping source -> destination to
// the account the client connection nc (a connection to this server) is
// bound to.
func (s *Server) mapForClient(nc *nats.Conn, source, destination string) error {
	cid, err := nc.GetClientID()
	if err != nil {
		return fmt.Errorf("subject mapping %q: the connection's client id: %w", source, err)
	}
	acc := s.srv.GlobalAccount()
	if cz, err := s.srv.Connz(&server.ConnzOptions{CID: cid, Username: true}); err == nil && len(cz.Conns) == 1 && cz.Conns[0].Account != "" {
		if a, err := s.srv.LookupAccount(cz.Conns[0].Account); err == nil {
			acc = a
		}
	}
	if err := acc.AddMapping(source, destination); err != nil {
		return fmt.Errorf("%w: subject mapping %q -> %q in account %s: %w", ErrInvalidConfig, source, destination, acc.Name, err)
	}
	return nil
}

// Traffic is a server's message counters since it started, as its /varz
// monitoring endpoint reports them: messages and bytes received (from
// clients, routes and itself) and sent.
type Traffic struct {
	InMsgs, OutMsgs, InBytes, OutBytes int64
}

// Traffic returns the server's message counters (see [Traffic]).
func (s *Server) Traffic() Traffic {
	v, err := s.srv.Varz(nil)
	if err != nil {
		return Traffic{}
	}
	return Traffic{InMsgs: v.InMsgs, OutMsgs: v.OutMsgs, InBytes: v.InBytes, OutBytes: v.OutBytes}
}

// StoreDir is the JetStream store directory in use.
func (s *Server) StoreDir() string { return s.srv.StoreDir() }

// Shutdown stops the server, waits for it to finish and releases its store
// directory (see [LockFile]).
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.lockOnce.Do(s.lock.release)
}

// serverLog adapts slog to nats-server's logger; notices are logged at debug.
// A nil l discards everything. The first Fatalf message is also sent on
// fatal, without blocking.
type serverLog struct {
	l     *slog.Logger
	fatal chan<- string
}

func (l serverLog) log(level slog.Level, format string, v ...any) {
	if l.l != nil {
		l.l.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "nats-server")
	}
}

func (l serverLog) Noticef(format string, v ...any) { l.log(slog.LevelDebug, format, v...) }
func (l serverLog) Warnf(format string, v ...any)   { l.log(slog.LevelWarn, format, v...) }
func (l serverLog) Errorf(format string, v ...any)  { l.log(slog.LevelError, format, v...) }
func (l serverLog) Debugf(format string, v ...any)  { l.log(slog.LevelDebug, format, v...) }
func (l serverLog) Tracef(format string, v ...any)  {}

func (l serverLog) Fatalf(format string, v ...any) {
	l.log(slog.LevelError, format, v...)
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}
