package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// env is a real JetStream server with a node hosting the example kinds,
// the record store, a supervisor with the demo, and a gateway on an
// httptest server.
type env struct {
	srv    *bustest.Server
	conn   *bus.Conn
	actors *actor.Client
	gw     *web.Gateway
	http   *httptest.Server
	reg    *prometheus.Registry
	url    string // ws://…/ws
}

type envOpts struct {
	cfg        web.Config
	supervisor bool
	// dupWindow is the streams' duplicate window (default 2 minutes).
	dupWindow time.Duration
	// noIndexer leaves the record store's server (and its indexer) out:
	// the id index stays empty, an index that lags forever.
	noIndexer bool
	// groups, when above 1, provisions that many stream groups over 8
	// partitions (docs/layout.md).
	groups int
}

// background runs run(ctx) until the test ends, waiting for ready.
func background(t testing.TB, what string, run func(context.Context) error, ready func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop", what)
		}
	})
	if ready != nil {
		actortest.Eventually(t, 15*time.Second, what+" ready", ready)
	}
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	srv := bustest.NewServer(t)
	cfg := bus.Config{DuplicateWindow: o.dupWindow}
	if o.groups > 1 {
		srv.MapPartitions(t, 8)
		cfg.Partitions, cfg.Groups = 8, o.groups
	}
	conn := srv.Connect(t, cfg)
	actortest.StartNode(t, conn, actor.Options{Logger: quiet}, kinds.Counter(), kinds.TaskA(), kinds.TaskB())
	ctx := context.Background()
	if !o.noIndexer {
		ss, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		background(t, "store server", ss.Run, nil)
	}
	if o.supervisor {
		sup, err := supervisor.New(conn, supervisor.Options{Logger: quiet, AckWait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		def, err := demo.Definition()
		if err != nil {
			t.Fatal(err)
		}
		if err := sup.Register(def); err != nil {
			t.Fatal(err)
		}
		background(t, "supervisor", sup.Run, sup.Ready)
	}
	actors, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, conn: conn, actors: actors}
	return e.withGateway(t, o.cfg)
}

// withGateway returns a copy of e with a new gateway configured by cfg
// (and its own metrics registry) on the same NATS, node and store.
func (e *env) withGateway(t testing.TB, cfg web.Config) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Logger, cfg.Registerer = quiet, reg
	gw, err := web.New(context.Background(), e.conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		gw.Close()
		hs.Close()
	})
	c := *e
	c.gw, c.http, c.reg, c.url = gw, hs, reg, "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws"
	return &c
}

// client is a test WebSocket client reading frames in the background.
type client struct {
	t       testing.TB
	ws      *websocket.Conn
	frames  chan map[string]any
	done    chan struct{}
	mu      sync.Mutex
	err     error // why reading ended
	reading bool  // startReading was called
}

func (e *env) dial(t testing.TB, hdr http.Header) *client {
	t.Helper()
	c := e.dialNoRead(t, hdr)
	c.startReading()
	return c
}

func (e *env) dialNoRead(t testing.TB, hdr http.Header) *client {
	t.Helper()
	return e.dialWith(t, &websocket.DialOptions{HTTPHeader: hdr})
}

func (e *env) dialWith(t testing.TB, opts *websocket.DialOptions) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, e.url, opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if resp.Body != nil {
		_ = resp.Body.Close()
	}
	ws.SetReadLimit(16 << 20)
	c := &client{t: t, ws: ws, frames: make(chan map[string]any, 100_000), done: make(chan struct{})}
	t.Cleanup(func() {
		_ = ws.CloseNow()
		c.mu.Lock()
		reading := c.reading
		c.mu.Unlock()
		if reading {
			<-c.done
		}
	})
	return c
}

// dialSmallBuffer dials with a 4 KiB socket receive buffer and does not
// read: a client that never reads, whose kernel holds little for it.
func (e *env) dialSmallBuffer(t testing.TB) *client {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	t.Cleanup(hc.CloseIdleConnections)
	return e.dialWith(t, &websocket.DialOptions{HTTPClient: hc})
}

func (c *client) startReading() {
	c.mu.Lock()
	c.reading = true
	c.mu.Unlock()
	go func() {
		defer close(c.done)
		for {
			_, b, err := c.ws.Read(context.Background())
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				return
			}
			var f map[string]any
			if err := json.Unmarshal(b, &f); err != nil {
				c.t.Errorf("gateway sent a frame that is not JSON: %q", b)
				continue
			}
			c.frames <- f
		}
	}()
}

// write sends v as a text frame.
func (c *client) write(v any) {
	c.t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next returns the next frame matching keep, failing after 15s.
func (c *client) next(what string, keep func(map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case f := <-c.frames:
			if keep == nil || keep(f) {
				return f
			}
		case <-deadline:
			c.t.Fatalf("no %s within 15s", what)
		case <-c.done:
			// drain what was read before the end
			select {
			case f := <-c.frames:
				if keep == nil || keep(f) {
					return f
				}
				continue
			default:
			}
			c.t.Fatalf("connection ended before %s: %v", what, c.readErr())
		}
	}
}

// reply returns the next frame answering request req.
func (c *client) reply(req string) map[string]any {
	c.t.Helper()
	return c.next("reply to "+req, func(f map[string]any) bool { return f["req"] == req })
}

func (c *client) readErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// closed waits for the connection to end and returns the close error.
func (c *client) closed() websocket.CloseError {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.t.Fatal("connection not closed within 20s")
	}
	var ce websocket.CloseError
	if !errors.As(c.readErr(), &ce) {
		c.t.Fatalf("connection ended without a close frame: %v", c.readErr())
	}
	return ce
}

func isType(typ string) func(map[string]any) bool {
	return func(f map[string]any) bool { return f["type"] == typ }
}

func num(v any) uint64 {
	f, _ := v.(float64)
	return uint64(f)
}
