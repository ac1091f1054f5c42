// Package bustest starts a real nats-server with JetStream for tests,
// in one line, the way httptest starts an HTTP server:
//
//	srv := bustest.NewServer(t)  // random port, storage in t.TempDir()
//	conn := srv.Connect(t)       // *bus.Conn, streams and buckets provisioned
//
// The server runs in the test's process unless the environment variable
// [ServerEnv] names a nats-server binary: then it runs that binary as a
// process of its own, as `make test` does (a real nats-server as deployed,
// and one the race detector does not slow down).
//
// A fresh server gets 8 partitions a kind ([Partitions]) rather than the
// deployment's 64, so that a node in a test is ready in a fraction of the
// time; a test about partitions asks for its count in bus.Config.
//
// [NewCluster] starts a NATS cluster the same way, in-process or as
// processes:
//
//	c := bustest.NewCluster(t, 3)  // routed on 127.0.0.1, a JetStream meta leader elected
//	conn := c.Connect(t)           // all three URLs, streams and buckets in 3 replicas
//	c.StreamLeader(t, "EA_MBOX").Shutdown()
//
// Everything started is stopped by t.Cleanup.
package bustest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is a nats-server with JetStream on 127.0.0.1, embedded or a
// process of its own (see [ServerEnv]).
type Server struct {
	// URL is the client URL, stable across Restart.
	URL string
	// StoreDir is the JetStream store directory, kept across Restart.
	StoreDir string

	addr     string
	bin      string            // a nats-server binary to run (ServerEnv), or "" to embed
	srv      *bus.Server       // the embedded server, when bin is ""
	proc     *process          // the server process, when bin is set
	mappings map[string]string // added by MapMailboxes, kept across Restart
}

// NewServer starts a server on a free port with file storage in t.TempDir():
// in the test's process, or as a process of its own when [ServerEnv] names
// a nats-server binary.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{StoreDir: t.TempDir(), addr: "127.0.0.1:0", bin: serverBinary(t)}
	s.start(t)
	s.URL = "nats://" + s.addr
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	var err error
	for range 50 { // the port may linger briefly after a shutdown
		if s.bin != "" {
			if s.proc, err = startProcess(s.bin, processConfig{addr: s.addr, storeDir: s.StoreDir, mappings: s.mappings}); err == nil {
				s.addr = s.proc.cfg.addr
				return
			}
		} else if s.srv, err = bus.StartServer(bus.ServerConfig{Listen: s.addr, StoreDir: s.StoreDir, Mappings: s.mappings}); err == nil {
			s.addr = s.srv.Addr()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("bustest: start nats-server: %v", err)
}

// MapPartitions is [Server.MapMailboxes] for the default prefix and
// partitions mailbox partitions: what a test of stream groups starts with,
// before it connects with bus.Config{Partitions: partitions, Groups: G}.
func (s *Server) MapPartitions(t testing.TB, partitions int) {
	t.Helper()
	names, err := bus.NewNames(bus.DefaultPrefix)
	if err == nil {
		names, err = names.WithPartitions(partitions)
	}
	if err != nil {
		t.Fatalf("bustest: %v", err)
	}
	s.MapMailboxes(t, names)
}

// MapMailboxes adds the account subject mapping that stream groups need
// (see [bus.Names.MailboxMapping]) to the server, now and after Restart, as
// an operator adds it to the server's configuration. Not safe for
// concurrent use with Restart.
func (s *Server) MapMailboxes(t testing.TB, names bus.Names) {
	t.Helper()
	src, dest := names.MailboxMapping()
	if s.mappings == nil {
		s.mappings = map[string]string{}
	}
	s.mappings[src] = dest
	if s.proc != nil {
		if err := s.proc.reload(s.mappings); err != nil {
			t.Fatalf("bustest: %v", err)
		}
		waitMapped(t, s.URL, names, s.proc.out)
	}
	if s.srv != nil {
		if err := s.srv.MapSubjects(src, dest); err != nil {
			t.Fatalf("bustest: %v", err)
		}
	}
}

// Shutdown stops the server; it is safe to call more than once.
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv = nil
	}
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
}

// Restart stops the server and starts it again on the same address with the
// same store, as an operator restarting nats-server would.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Shutdown()
	s.start(t)
}

// Partitions is the partition count a kind gets on a server where
// [Server.Connect] provisions first and its configuration leaves
// Partitions at 0: a node opens each partition of each kind it hosts
// before it is ready (a lease write and three JetStream API calls each), so
// with the deployment default of 64 ([bus.DefaultPartitions]) a node of two
// kinds took 3–5 s to start under -race, and with 8 a fifth of a second.
// What a kind's logic sees does not depend on the count. A test about the
// count itself asks for it in the configuration.
const Partitions = 8

// Connect connects to the server with cfg (URL filled in, prefix "ea" unless
// set), provisions streams and buckets, and closes the connection at
// cleanup. With cfg.Partitions 0 it adopts the count already provisioned on
// the server, or provisions [Partitions] on a fresh one (and adopts the
// count of a process that provisions the server at the same moment).
func (s *Server) Connect(t testing.TB, cfg ...bus.Config) *bus.Conn {
	t.Helper()
	var c bus.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.URL = s.URL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, c)
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	chose := false // Partitions is ours, not the test's
	if c.Partitions == 0 {
		_, err := conn.JetStream().Stream(ctx, conn.Names().MailboxStream())
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			_ = conn.Close()
			c.Partitions, chose = Partitions, true
			if conn, err = bus.Connect(ctx, c); err != nil {
				t.Fatalf("bustest: connect: %v", err)
			}
		case err != nil:
			_ = conn.Close()
			t.Fatalf("bustest: read the mailbox stream: %v", err)
		}
	}
	err = conn.Provision(ctx)
	if chose && errors.Is(err, bus.ErrInvalidConfig) {
		// A node of the test provisioned its own count meanwhile: adopt it.
		_ = conn.Close()
		c.Partitions = 0
		if conn, err = bus.Connect(ctx, c); err != nil {
			t.Fatalf("bustest: connect: %v", err)
		}
		err = conn.Provision(ctx)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err != nil {
		t.Fatalf("bustest: provision: %v", err)
	}
	return conn
}

// Client connects a plain NATS client to the server, with nothing
// provisioned, the way a publisher in another process would, and closes it
// at cleanup.
func (s *Server) Client(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL)
	if err != nil {
		t.Fatalf("bustest: connect a client: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("bustest: jetstream: %v", err)
	}
	return nc, js
}
