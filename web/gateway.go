package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// Gateway serves the WebSocket endpoint (/ws) and the live record view (/)
// over one provisioned NATS connection. Create it with [New]; serve it with
// [Gateway.Run], or mount [Gateway.Handler] in your own server and call
// [Gateway.Close] at the end. It is safe for concurrent use.
type Gateway struct {
	cfg     Config
	conn    *bus.Conn
	names   bus.Names
	actors  *actor.Client
	kinds   *kindTypes // the record types kinds declare, cached
	store   *store.Client
	orch    *supervisor.Client
	metrics *metrics
	handler http.Handler
	users   atomic.Pointer[Users] // the users file as last read (nil: none)

	base context.Context // parent of every session; cancelled by Close
	stop context.CancelFunc

	mu       sync.Mutex // guards sessions, closed, ln and addr
	sessions map[*session]struct{}
	closed   bool
	ln       net.Listener
	addr     net.Addr
	ready    chan struct{}  // closed once Run listens
	wg       sync.WaitGroup // one per session, and the users file's reloader
}

// New returns a gateway on conn, which must be connected and provisioned.
// cfg is validated ([Config.Validate]); zero fields take their defaults.
func New(ctx context.Context, conn *bus.Conn, cfg Config) (*Gateway, error) {
	if conn == nil || conn.NATS() == nil {
		return nil, invalidf("conn is nil: pass a connected, provisioned *bus.Conn")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if conn.Names().Groups() == 1 {
		// A connection not told the layout must not serve one stream's
		// names on a deployment with stream groups.
		if err := conn.OneStream(ctx, "the web gateway on a connection not told the stream group count"); err != nil {
			return nil, err
		}
	}
	actors, err := actor.NewClient(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	sc, err := store.NewClient(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	oc, err := supervisor.NewClient(conn)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	var usersData []byte
	var users *Users
	if cfg.UsersFile != "" {
		if usersData, err = readUsersFile(cfg.UsersFile); err == nil {
			users, err = ParseUsers(usersData)
		}
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	base, stop := context.WithCancel(context.WithoutCancel(ctx))
	g := &Gateway{
		cfg: cfg, conn: conn, names: conn.Names(), actors: actors, kinds: newKindTypes(), store: sc, orch: oc, metrics: m,
		base: base, stop: stop, sessions: map[*session]struct{}{}, ready: make(chan struct{}),
	}
	g.users.Store(users)
	if cfg.UsersFile != "" {
		g.wg.Add(1)
		go g.reloadUsers(usersData)
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", g.serveWS)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeFileFS(w, r, sub, "index.html")
	})
	g.handler = mux
	return g, nil
}

// Handler returns the gateway's HTTP handler: GET / (the live view),
// GET /assets/… and GET /ws (the WebSocket endpoint).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Listen binds Config.Addr now (Run then serves on it), so that a caller
// learns at once whether the address is free, and which port 0 chose.
func (g *Gateway) Listen() (net.Addr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		return g.ln.Addr(), nil
	}
	ln, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: listen on %s: %w", g.cfg.Addr, err)
	}
	g.ln, g.addr = ln, ln.Addr()
	close(g.ready)
	return g.addr, nil
}

// Run serves on Config.Addr (bound by [Gateway.Listen] if it was called)
// until ctx ends, then closes every connection (status 1001) and returns
// nil. It returns an error when the address cannot be listened on.
func (g *Gateway) Run(ctx context.Context) error {
	if _, err := g.Listen(); err != nil {
		return err
	}
	g.mu.Lock()
	ln := g.ln
	g.mu.Unlock()
	srv := &http.Server{Handler: g.handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-done:
		g.Close()
		return fmt.Errorf("gateway: serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx) // hijacked WebSockets are closed by Close
	g.Close()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("gateway: serve: %w", err)
	}
	return nil
}

// Addr returns the address Run listens on (useful with port 0), waiting
// until it listens or ctx ends.
func (g *Gateway) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case <-g.ready:
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.addr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes every connection (status 1001, "gateway stopping") and
// waits for their goroutines. Connections arriving afterwards are refused.
func (g *Gateway) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.stop()
	g.wg.Wait()
}

// add registers s; false once the gateway is closed.
func (g *Gateway) add(s *session) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.sessions[s] = struct{}{}
	g.wg.Add(1)
	return true
}

func (g *Gateway) remove(s *session) {
	g.mu.Lock()
	delete(g.sessions, s)
	g.mu.Unlock()
	g.wg.Done()
}

// authOn reports whether connections must present a token.
func (g *Gateway) authOn() bool { return g.cfg.Token != "" || g.cfg.UsersFile != "" }

// reloadUsers reads the users file every UsersReload until the gateway
// closes; when its content changed and parses, the new users take effect
// and connections whose token is no longer there (or maps to another
// identity) are closed with 4401. A file that cannot be read or parsed is
// logged and the users as last read stay in force.
func (g *Gateway) reloadUsers(last []byte) {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.UsersReload)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-g.base.Done():
			return
		case <-t.C:
		}
		data, err := readUsersFile(g.cfg.UsersFile)
		if err == nil && bytes.Equal(data, last) {
			failing = false
			continue
		}
		var users *Users
		if err == nil {
			users, err = ParseUsers(data)
		}
		if err != nil {
			if !failing {
				g.cfg.Logger.Error("gateway: users file not reloaded; the users as last read stay in force", "file", g.cfg.UsersFile, "err", err)
			}
			failing = true
			g.metrics.usersReloads.WithLabelValues("failed").Inc()
			continue
		}
		failing = false
		last = data
		g.users.Store(users)
		g.metrics.usersReloads.WithLabelValues("loaded").Inc()
		g.cfg.Logger.Info("gateway: users file reloaded", "file", g.cfg.UsersFile, "tokens", users.Len())
		g.revoke(users)
	}
}

// revoke closes the connections authenticated by a users-file token that
// users no longer maps to the same identity.
func (g *Gateway) revoke(users *Users) {
	g.mu.Lock()
	var gone []*session
	for s := range g.sessions {
		c := s.cred.Load()
		if c == nil || !c.fromFile {
			continue
		}
		if id, ok := users.lookupHash(c.sum); !ok || id != c.id {
			gone = append(gone, s)
		}
	}
	g.mu.Unlock()
	for _, s := range gone {
		s.fail(CloseUnauthorized, "unauthorized: token revoked", "revoked")
	}
}
