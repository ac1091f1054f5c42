package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
)

// quiet discards connection and server logs in tests.
var quiet = slog.New(slog.DiscardHandler)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := []bus.Config{
		{},
		{URL: "nats://127.0.0.1:4222", Prefix: "acme", Replicas: 3},
		{Listen: "127.0.0.1:0"},
		{Listen: ":4222"},
		{Replicas: 5, StateHistory: 64, MaxConsumers: 1},
		{DuplicateWindow: time.Minute, MaxAge: time.Minute},
		{URL: "nats://x:4222", Listen: "ignored when a URL is set"},
	}
	for _, cfg := range valid {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", cfg, err)
		}
	}

	invalid := []struct {
		name    string
		cfg     bus.Config
		setting string // what the message must name
	}{
		{"prefix with a dot", bus.Config{Prefix: "ea.x"}, "prefix"},
		{"prefix with a wildcard", bus.Config{Prefix: "*"}, "prefix"},
		{"negative replicas", bus.Config{Replicas: -1}, "replicas"},
		{"too many replicas", bus.Config{Replicas: 6}, "replicas"},
		{"negative duplicate window", bus.Config{DuplicateWindow: -time.Second}, "duplicate window"},
		{"negative max age", bus.Config{MaxAge: -time.Second}, "max age"},
		{"max age below duplicate window", bus.Config{MaxAge: time.Minute}, "max age"},
		{"max age below custom duplicate window", bus.Config{MaxAge: time.Second, DuplicateWindow: 2 * time.Second}, "max age"},
		{"negative max consumers", bus.Config{MaxConsumers: -1}, "max consumers"},
		{"negative state history", bus.Config{StateHistory: -1}, "state history"},
		{"state history above 64", bus.Config{StateHistory: 65}, "state history"},
		{"negative connect timeout", bus.Config{ConnectTimeout: -time.Second}, "connect timeout"},
		{"listen without port", bus.Config{Listen: "127.0.0.1"}, "listen"},
		{"listen with bad port", bus.Config{Listen: "127.0.0.1:http"}, "listen"},
		{"listen with port out of range", bus.Config{Listen: "127.0.0.1:65536"}, "listen"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v; want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.setting) {
				t.Errorf("Validate() = %q; want the message to name %q", err, tt.setting)
			}
			// Connect refuses it before starting or dialling anything.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := bus.Connect(ctx, tt.cfg); !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("Connect() = %v; want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

func TestConnectEmbedded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = conn.Close()
		}
	})

	srv := conn.Server()
	if srv == nil {
		t.Fatal("Server() = nil; want the embedded server")
	}
	if !conn.Connected() {
		t.Fatal("Connected() = false right after Connect")
	}
	if got, want := conn.ClientURL(), srv.ClientURL(); got != want {
		t.Errorf("ClientURL() = %q; want the embedded server's %q", got, want)
	}
	if got := srv.StoreDir(); !strings.HasPrefix(got, dir) {
		t.Errorf("StoreDir() = %q; want it inside %q", got, dir)
	}
	if got := conn.Config(); got.Prefix != "ea" || got.Replicas != 1 || got.MaxConsumers != 1_000_000 {
		t.Errorf("Config() = %+v; want the defaults filled in", got)
	}
	// JetStream is on.
	if _, err := conn.JetStream().AccountInfo(ctx); err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
	addr := srv.Addr()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err != nil {
		t.Fatalf("dial %s while running: %v", addr, err)
	} else {
		_ = c.Close()
	}

	if err := conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	if conn.Connected() {
		t.Error("Connected() = true after Close")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts connections after Close", addr)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestConnectUnreachable(t *testing.T) {
	url := "nats://" + freeAddr(t)
	const timeout = 700 * time.Millisecond
	start := time.Now()
	conn, err := bus.Connect(t.Context(), bus.Config{URL: url, ConnectTimeout: timeout, Logger: quiet})
	elapsed := time.Since(start)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("Connect(%s) succeeded; nothing listens there", url)
	}
	if !strings.Contains(err.Error(), url) {
		t.Errorf("error %q does not name the URL %s", err, url)
	}
	if elapsed < timeout-50*time.Millisecond || elapsed > timeout+2*time.Second {
		t.Errorf("Connect gave up after %s; want about ConnectTimeout (%s)", elapsed, timeout)
	}

	// The caller's context bounds it too.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := bus.Connect(ctx, bus.Config{URL: url, ConnectTimeout: time.Minute, Logger: quiet}); err == nil {
		t.Fatal("Connect succeeded; nothing listens there")
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("Connect ignored its context: gave up after %s", elapsed)
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, bus.Config{Logger: quiet})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	subject := conn.Names().Mailbox(records.Ref{Kind: "echo", ID: "1"})
	if _, err := conn.JetStream().Publish(ctx, subject, []byte("before")); err != nil {
		t.Fatalf("publish before restart: %v", err)
	}

	srv.Restart(t)

	var lastErr error
	deadline := time.Now().Add(20 * time.Second)
	for {
		if conn.Connected() {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, lastErr = conn.JetStream().Publish(pctx, subject, []byte("after"))
			pcancel()
			if lastErr == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful publish within 20s of the restart (connected=%t, last error: %v)", conn.Connected(), lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Both records are in the stream: the file store survived the restart.
	s, err := conn.MailboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("records stream holds %d messages after the restart; want 2", info.State.Msgs)
	}
	msg, err := s.GetLastMsgForSubject(ctx, conn.Names().StoredMailbox(records.Ref{Kind: "echo", ID: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "after" {
		t.Errorf("last record = %q; want %q", msg.Data, "after")
	}
}

func TestStartServerAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()

	start := time.Now()
	srv, err := bus.StartServer(bus.ServerConfig{Listen: addr, StoreDir: t.TempDir()})
	if err == nil {
		srv.Shutdown()
		t.Fatalf("StartServer on %s succeeded; the address is in use", addr)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("StartServer took %s to report an address in use", elapsed)
	}
	t.Logf("StartServer on a busy address: %v", err)
	for _, want := range []string{addr, "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// Connect reports the same through its embedded server.
	_, err = bus.Connect(t.Context(), bus.Config{Listen: addr, StoreDir: t.TempDir(), Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Connect with Listen in use = %v; want an 'address already in use' error", err)
	}
}

func TestStartServerRejectsBadListen(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"127.0.0.1", "127.0.0.1:x", "127.0.0.1:70000"} {
		srv, err := bus.StartServer(bus.ServerConfig{Listen: listen, StoreDir: t.TempDir()})
		if err == nil {
			srv.Shutdown()
			t.Fatalf("StartServer(%q) succeeded", listen)
		}
		if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "listen") {
			t.Errorf("StartServer(%q) = %v; want an invalid-config error naming the listen address", listen, err)
		}
	}
}

func TestServerShutdownTwice(t *testing.T) {
	t.Parallel()
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.Shutdown()
}

func TestCloseTwice(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := conn.JetStream().AccountInfo(ctx); err == nil {
		t.Fatal("JetStream call succeeded after Close")
	}
}

func TestCloseWhileServerDown(t *testing.T) {
	srv := bustest.NewServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{URL: srv.URL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	for deadline := time.Now().Add(10 * time.Second); conn.Connected(); {
		if time.Now().After(deadline) {
			t.Fatal("still connected 10s after the server shut down")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	err = conn.Close()
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Close while the server is down took %s", elapsed)
	}
	if !conn.NATS().IsClosed() {
		t.Fatal("connection not closed after Close")
	}
	// It could not drain, and says so.
	if err == nil || !strings.Contains(err.Error(), "drain") {
		t.Errorf("Close while the server is down = %v; want an error saying it could not drain", err)
	}
}

// TestConnLost makes the server close the connection for good, as a
// subject longer than its maximum control line does, and checks that Lost
// and Err say so, and that a Close afterwards returns at once.
func TestConnLost(t *testing.T) {
	srv := bustest.NewServer(t)
	conn, err := bus.Connect(context.Background(), bus.Config{URL: srv.URL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if conn.Err() != nil || conn.State() != bus.StateConnected {
		t.Fatalf("before anything happened: Err = %v, State = %s; want nil, connected", conn.Err(), conn.State())
	}
	// The server answers -ERR 'maximum control line exceeded' and closes;
	// nats.go treats that answer as final.
	_ = conn.NATS().Publish(strings.Repeat("x", 5000), nil)
	select {
	case <-conn.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed 10s after the server closed the connection")
	}
	if conn.State() != bus.StateClosed {
		t.Errorf("State after the server closed the connection = %s, want closed", conn.State())
	}
	err = conn.Err()
	if !errors.Is(err, bus.ErrConnLost) || !strings.Contains(err.Error(), "control line") {
		t.Errorf("Err = %v, want ErrConnLost with the server's reason", err)
	}
	start := time.Now()
	_ = conn.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close of a lost connection took %s", took)
	}
}

// TestCloseIsNotLost: a connection closed by Close is not lost.
func TestCloseIsNotLost(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn, err := bus.Connect(context.Background(), bus.Config{URL: srv.URL, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Lost():
		t.Fatalf("Lost closed after Close: %v", conn.Err())
	default:
	}
	if conn.Err() != nil {
		t.Errorf("Err after Close = %v, want nil", conn.Err())
	}
}

// TestStoredAt reads what a stream holds from its leader: by sequence, the
// next on a subject, the last on a subject (LastStored), and ErrNoMessage
// past the end or on a subject with nothing.
func TestStoredAt(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := t.Context()
	dead := conn.Names().Dead(records.Ref{Kind: "counter", ID: "c1"})
	other := conn.Names().Dead(records.Ref{Kind: "counter", ID: "c2"})
	var seqs []uint64
	for i, subject := range []string{dead, other, dead} {
		rec, err := records.New("x", nil)
		if err != nil {
			t.Fatal(err)
		}
		rec.ID = fmt.Sprint("r", i)
		ack, err := conn.JetStream().PublishMsg(ctx, rec.Msg(subject))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	stream := conn.Names().DeadStream()
	m, err := conn.StoredAt(ctx, stream, seqs[1], "")
	if err != nil || m.Subject != other || m.Header.Get(records.HeaderID) != "r1" || m.Time.IsZero() {
		t.Errorf("StoredAt(seq %d) = %+v, %v; want r1 on %s", seqs[1], m, err, other)
	}
	m, err = conn.StoredAt(ctx, stream, seqs[0]+1, dead)
	if err != nil || m.Seq != seqs[2] || m.Header.Get(records.HeaderID) != "r2" {
		t.Errorf("StoredAt(next on %s after %d) = %+v, %v; want r2 at %d", dead, seqs[0], m, err, seqs[2])
	}
	if _, err := conn.StoredAt(ctx, stream, seqs[2]+1, ""); !errors.Is(err, bus.ErrNoMessage) {
		t.Errorf("StoredAt past the end: %v, want ErrNoMessage", err)
	}
	m, err = conn.LastStored(ctx, stream, dead)
	if err != nil || m.Seq != seqs[2] || m.Header.Get(records.HeaderID) != "r2" {
		t.Errorf("LastStored(%s) = %+v, %v; want r2 at %d", dead, m, err, seqs[2])
	}
	none := conn.Names().Dead(records.Ref{Kind: "counter", ID: "c3"})
	if _, err := conn.LastStored(ctx, stream, none); !errors.Is(err, bus.ErrNoMessage) {
		t.Errorf("LastStored(%s), with nothing on it: %v, want ErrNoMessage", none, err)
	}
}

// TestAdoptReadsTheDeployment: a client that does not provision has the
// default partition count until Adopt reads the deployment's, and then
// names stored mailbox subjects as the nodes store them.
func TestAdoptReadsTheDeployment(t *testing.T) {
	srv := bustest.NewServer(t)
	provisioned := srv.Connect(t, bus.Config{Partitions: 12})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := bus.Connect(ctx, bus.Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if got := client.Names().Partitions(); got != bus.DefaultPartitions {
		t.Fatalf("before Adopt: %d partitions, want the default %d", got, bus.DefaultPartitions)
	}
	client.Adopt(ctx)
	r := records.Ref{Kind: "counter", ID: "c7"}
	if got, want := client.Names().StoredMailbox(r), provisioned.Names().StoredMailbox(r); got != want || client.Config().Partitions != 12 {
		t.Fatalf("after Adopt: %d partitions, stored mailbox %s; want 12 and %s", client.Config().Partitions, got, want)
	}
	if got, ok := client.Names().RefOf(provisioned.Names().StoredMailbox(r)); !ok || got != r {
		t.Fatalf("after Adopt: RefOf(%s) = %v %v", provisioned.Names().StoredMailbox(r), got, ok)
	}
}
