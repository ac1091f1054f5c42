package bustest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ServerEnv names the environment variable that makes [NewServer] run the
// nats-server binary it names as a process of its own instead of in the
// test's process. `make test` sets it to a nats-server built from the
// module's own nats-server version without the race detector: the server is
// then a real nats-server as deployed, and under -race the test binary no
// longer instruments the server's code (the tests took 17% less CPU;
// BENCHMARKS.md, "Test suite"). Unset, or set to an empty string, the
// server is embedded.
// [NewCluster] runs each of its servers as such a process too.
const ServerEnv = "EA_TEST_NATS_SERVER"

// process is a nats-server run as a child process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	cfg  processConfig // what conf holds; mappings change on reload
	conf string        // the configuration file, rewritten by reload
	out  *tailBuffer   // the server's output, for errors
	// monitor reads the monitoring port, one connection per request: an
	// idle kept-alive connection would outlive the test's goroutine check.
	monitor *http.Client
}

// processConfig is what a nats-server process is configured with.
type processConfig struct {
	name     string             // server_name
	addr     string             // client host:port; port 0 for a free one
	storeDir string             // JetStream store directory
	mappings map[string]string  // account subject mappings
	monitor  string             // monitoring (HTTP) host:port, or "" for none
	cluster  *bus.ClusterConfig // name and routes, for a server of a cluster
}

// startProcess starts bin with cfg and waits until it serves: JetStream
// answers on a lone server; a server of a cluster accepts clients (its
// JetStream waits for the other servers). The returned process's cfg.addr
// holds the port chosen for port 0.
func startProcess(bin string, cfg processConfig) (*process, error) {
	host, port, err := net.SplitHostPort(cfg.addr)
	if err != nil {
		return nil, err
	}
	if port == "0" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		cfg.addr = l.Addr().String()
		_ = l.Close()
	}
	p := &process{
		done: make(chan struct{}), cfg: cfg, conf: cfg.storeDir + ".conf", out: &tailBuffer{max: 8 << 10},
		// A server that does not answer within a second counts as not serving.
		monitor: &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	if err := p.writeConfig(); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, "-c", p.conf)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = childAttrs()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", bin, ServerEnv, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	serves := func() error { return jetStreamAnswers("nats://" + cfg.addr) }
	if cfg.cluster != nil {
		serves = func() error { return p.healthz("js-server-only=true") }
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := serves(); err == nil {
			return p, nil
		} else if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("nats-server on %s did not serve within 15s: %v; its output: %s", cfg.addr, err, p.out)
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("nats-server on %s exited: %s", cfg.addr, p.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// jetStreamAnswers reports whether the server at url answers a JetStream
// account info request.
func jetStreamAnswers(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = nc.Request("$JS.API.INFO", nil, time.Second)
	return err
}

func (p *process) writeConfig() error {
	c := p.cfg
	host, port, _ := net.SplitHostPort(c.addr)
	name := c.name
	if name == "" {
		name = "ea-embedded"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "host: %q\nport: %s\nserver_name: %q\n", host, port, name)
	fmt.Fprintf(&b, "jetstream { store_dir: %q }\n", c.storeDir)
	if c.monitor != "" {
		fmt.Fprintf(&b, "http: %q\n", c.monitor)
	}
	if c.cluster != nil {
		fmt.Fprintf(&b, "cluster {\n  name: %q\n  listen: %q\n  routes: [\n", c.cluster.Name, c.cluster.Listen)
		for _, r := range c.cluster.Routes {
			fmt.Fprintf(&b, "    %q\n", r)
		}
		b.WriteString("  ]\n}\n")
	}
	if len(c.mappings) > 0 {
		srcs := make([]string, 0, len(c.mappings))
		for src := range c.mappings {
			srcs = append(srcs, src)
		}
		sort.Strings(srcs)
		b.WriteString("mappings {\n")
		for _, src := range srcs {
			fmt.Fprintf(&b, "  %q: %q\n", src, c.mappings[src])
		}
		b.WriteString("}\n")
	}
	return os.WriteFile(p.conf, []byte(b.String()), 0o600)
}

// reload rewrites the configuration with mappings and has the server
// reload it.
func (p *process) reload(mappings map[string]string) error {
	p.cfg.mappings = maps.Clone(mappings)
	if err := p.writeConfig(); err != nil {
		return err
	}
	return p.cmd.Process.Signal(syscall.SIGHUP)
}

// monitorJSON decodes the answer of the monitoring endpoint path (such as
// "/jsz?accounts=true") into v.
func (p *process) monitorJSON(path string, v any) error {
	resp, err := p.monitorGet(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// monitorGet gets path from the monitoring port.
func (p *process) monitorGet(path string) (*http.Response, error) {
	return p.monitor.Get("http://" + p.cfg.monitor + path)
}

// healthz returns nil when /healthz with the query answers ok, otherwise
// what it says is not.
func (p *process) healthz(query string) error {
	var h struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	resp, err := p.monitorGet("/healthz?" + query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("/healthz: %w", err)
	}
	if h.Status == "ok" {
		return nil
	}
	if h.Error != "" {
		return fmt.Errorf("nats-server %s: %s", p.cfg.name, h.Error)
	}
	return fmt.Errorf("nats-server %s: status %s", p.cfg.name, h.Status)
}

// stop shuts the server down as SIGTERM does (stores flushed), or kills
// it after 10 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.TrimSpace(b.buf))
}

// serverBinary is the binary ServerEnv names, or "" to embed. A name that
// is not an executable file fails the test rather than silently embedding.
func serverBinary(t testing.TB) string {
	bin := os.Getenv(ServerEnv)
	if bin == "" {
		return ""
	}
	abs, err := filepath.Abs(bin)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(abs); err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
			err = errors.New("not an executable file")
		}
	}
	if err != nil {
		t.Fatalf("bustest: %s=%s: %v (build one with: go build -o bin/nats-server github.com/nats-io/nats-server/v2, or unset it to embed the server)", ServerEnv, bin, err)
	}
	return abs
}

// waitMapped waits until the server at url maps the mailboxes of names
// after a reload, the way bus.Conn's provisioning probes the mapping once:
// it core-publishes to the mailbox of a kind no effector has, naming no
// stream, until the probe arrives on the stored (mapped) subject. out is
// the server's output, for the failure message.
func waitMapped(t testing.TB, url string, names bus.Names, out fmt.Stringer) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("bustest: wait for the mailbox mapping: %v", err)
	}
	defer nc.Close()
	ref := records.Ref{Kind: "_probe", ID: "bustest"}
	sub, err := nc.SubscribeSync(names.StoredMailbox(ref))
	if err != nil {
		t.Fatalf("bustest: wait for the mailbox mapping: %v", err)
	}
	msg := nats.NewMsg(names.Mailbox(ref))
	msg.Header.Set(jetstream.ExpectedStreamHeader, "_bustest_no_such_stream")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatalf("bustest: wait for the mailbox mapping: %v", err)
		}
		if _, err := sub.NextMsg(50 * time.Millisecond); err == nil {
			return
		}
	}
	t.Fatalf("bustest: the server at %s did not map %s to %s within 10s of a reload; its output: %s", url, names.Mailbox(ref), names.StoredMailbox(ref), out)
}
