package bus_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/nats-io/nats.go"
)

// lockedBuffer is a log safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServerConfigFile: the embedded server takes users from a nats-server
// configuration file; a connection authenticates with Config.Options, a
// wrong password fails with ErrAuth at once, and a bad file is a config
// error naming it.
func TestServerConfigFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "users.conf")
	if err := os.WriteFile(conf, []byte("listen: 10.9.9.9:1\nauthorization { users = [ { user: alice, password: s3cret } ] }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	// Listen wins over the file's listen.
	conn, err := bus.Connect(ctx, bus.Config{Listen: "0.0.0.0:0", StoreDir: filepath.Join(dir, "store"), ServerConfigFile: conf, Logger: log,
		Options: []nats.Option{nats.UserInfo("alice", "s3cret")}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !conn.Server().AuthRequired() {
		t.Error("AuthRequired() = false with users in the config file")
	}
	if strings.Contains(logs.String(), "INSECURE") {
		t.Errorf("warned about a server with users:\n%s", logs.String())
	}
	url := "nats://" + strings.Replace(conn.Server().Addr(), "0.0.0.0", "127.0.0.1", 1)
	start := time.Now()
	_, err = bus.Connect(ctx, bus.Config{URL: url, Logger: log, Options: []nats.Option{nats.UserInfo("alice", "wrong")}})
	if !errors.Is(err, bus.ErrAuth) || time.Since(start) > 3*time.Second {
		t.Errorf("wrong password: %v after %s, want ErrAuth at once", err, time.Since(start))
	}

	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("authorization { users = [ \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "s2"), ConfigFile: bad})
	if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "server config "+bad) {
		t.Errorf("bad config file: %v", err)
	}
	if err := (bus.Config{Options: []nats.Option{nil}}).Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("a nil option: %v, want ErrInvalidConfig", err)
	}
}

// TestInsecureWarning: an embedded server listening beyond loopback with no
// users says so, loudly; on loopback it does not.
func TestInsecureWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen string
		warn   bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}, {"localhost:0", false}} {
		logs := &lockedBuffer{}
		srv, err := bus.StartServer(bus.ServerConfig{Listen: tc.listen, StoreDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		srv.Shutdown()
		if got := strings.Contains(logs.String(), "level=WARN msg=\"INSECURE: the embedded NATS server accepts clients on"); got != tc.warn || srv.AuthRequired() {
			t.Errorf("--listen %s: warned %v (want %v), auth %v:\n%s", tc.listen, got, tc.warn, srv.AuthRequired(), logs.String())
		}
	}
}

// TestOutputKey: every connection gets the same key, made once, even when
// several ask at once.
func TestOutputKey(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := make([][]byte, 4)
	var wg sync.WaitGroup
	for i := range keys {
		conn := srv.Connect(t)
		wg.Go(func() {
			k, err := conn.OutputKey(ctx)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i, k := range keys {
		if len(k) != bus.OutputKeySize || !bytes.Equal(k, keys[0]) {
			t.Fatalf("key %d = %x, key 0 = %x: want the same %d bytes", i, k, keys[0], bus.OutputKeySize)
		}
	}
	if bytes.Equal(keys[0], make([]byte, bus.OutputKeySize)) {
		t.Error("the key is all zeros")
	}
}
