package bus

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
}

// Server is an embedded nats-server with JetStream.
type Server struct {
	srv *server.Server
	cfg ServerConfig
}

// StartServer starts an embedded nats-server with JetStream and waits until it
// accepts clients.
func StartServer(cfg ServerConfig) (*Server, error) {
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
	opts := &server.Options{
		ServerName: "ea-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   store,
		SyncAlways: cfg.SyncAlways,
		NoSigs:     true,
		MaxPayload: server.MAX_PAYLOAD_SIZE,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	// The server reports startup failures (address in use, JetStream cannot
	// start) only through its logger's Fatalf, so always install one and
	// stop waiting as soon as it fires.
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
			return nil, fmt.Errorf("embedded nats-server on %s: %s (check --listen and --store)", cfg.Listen, msg)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("embedded nats-server did not accept clients on %s within %s (is the address in use? set --listen)", cfg.Listen, readyTimeout)
		}
	}
	return &Server{srv: srv, cfg: cfg}, nil
}

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

// StoreDir is the JetStream store directory in use.
func (s *Server) StoreDir() string { return s.srv.StoreDir() }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
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
