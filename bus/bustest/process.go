package bustest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
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
// [NewCluster] always runs in-process (its tests read the servers' state).
const ServerEnv = "EA_TEST_NATS_SERVER"

// process is a nats-server run as a child process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	conf string        // the configuration file, rewritten by reload
	out  *tailBuffer   // the server's output, for errors
}

// startProcess starts bin with a configuration for addr (host:port, port 0
// for a free one), the store dir and the mappings, and waits until it
// serves JetStream.
func startProcess(bin, addr, storeDir string, mappings map[string]string) (*process, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", err
	}
	if port == "0" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, "", err
		}
		addr = l.Addr().String()
		_ = l.Close()
	}
	p := &process{done: make(chan struct{}), conf: storeDir + ".conf", out: &tailBuffer{max: 8 << 10}}
	if err := p.writeConfig(addr, storeDir, mappings); err != nil {
		return nil, "", err
	}
	p.cmd = exec.Command(bin, "-c", p.conf)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = childAttrs()
	if err := p.cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s (%s): %w", bin, ServerEnv, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	url := "nats://" + addr
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := jetStreamAnswers(url); err == nil {
			return p, addr, nil
		} else if time.Now().After(deadline) {
			p.stop()
			return nil, "", fmt.Errorf("nats-server on %s did not serve JetStream within 15s: %v; its output: %s", addr, err, p.out)
		}
		select {
		case <-p.done:
			return nil, "", fmt.Errorf("nats-server on %s exited: %s", addr, p.out)
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

func (p *process) writeConfig(addr, storeDir string, mappings map[string]string) error {
	host, port, _ := net.SplitHostPort(addr)
	var b strings.Builder
	fmt.Fprintf(&b, "host: %q\nport: %s\nserver_name: \"ea-embedded\"\n", host, port)
	fmt.Fprintf(&b, "jetstream { store_dir: %q }\n", storeDir)
	if len(mappings) > 0 {
		srcs := make([]string, 0, len(mappings))
		for src := range mappings {
			srcs = append(srcs, src)
		}
		sort.Strings(srcs)
		b.WriteString("mappings {\n")
		for _, src := range srcs {
			fmt.Fprintf(&b, "  %q: %q\n", src, mappings[src])
		}
		b.WriteString("}\n")
	}
	return os.WriteFile(p.conf, []byte(b.String()), 0o600)
}

// reload rewrites the configuration and has the server reload it.
func (p *process) reload(addr, storeDir string, mappings map[string]string) error {
	if err := p.writeConfig(addr, storeDir, mappings); err != nil {
		return err
	}
	return p.cmd.Process.Signal(syscall.SIGHUP)
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

// waitMapped waits until the server maps the mailboxes of names after a
// reload, the way bus.Conn's provisioning probes the mapping once: it
// core-publishes to the mailbox of a kind no effector has, naming no
// stream, until the probe arrives on the stored (mapped) subject.
func (s *Server) waitMapped(t testing.TB, names bus.Names) {
	t.Helper()
	nc, err := nats.Connect(s.URL)
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
	t.Fatalf("bustest: the server did not map %s to %s within 10s of a reload; its output: %s", names.Mailbox(ref), names.StoredMailbox(ref), s.proc.out)
}
