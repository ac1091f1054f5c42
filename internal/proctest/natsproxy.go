package proctest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// NATSProxy forwards NATS client connections to a server, and injects the
// faults a test cannot otherwise cause:
//
//   - [NATSProxy.Freeze] moves no byte either way until [NATSProxy.Thaw]
//     (bytes are held, as TCP holds them across a partition that heals
//     before its timeouts): the server sees a frozen process (SIGSTOP, a
//     long GC pause) or a network cut it has not noticed, the connection
//     open with its subscriptions and pull requests in place. It needs no
//     privileges, which network namespaces would.
//   - [NATSProxy.Inject] answers every client, between two whole protocol
//     messages of the server's, with a line of its own: "-ERR 'reason'\r\n"
//     makes nats.go close the connection for good, as a server does after an
//     error it treats as final.
type NATSProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below; cond waits on it
	cond    *sync.Cond // broadcast when frozen or closed changes
	clients []*proxied
	frozen  bool
	closed  bool
}

// proxied is one client connection: writes to client take mu, so that an
// injected line never lands inside a server message.
type proxied struct {
	mu     sync.Mutex
	client net.Conn
	server net.Conn
}

// StartNATSProxy listens on a free loopback port and forwards each client
// to target (host:port). It stops at the test's cleanup.
func StartNATSProxy(t testing.TB, target string) *NATSProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &NATSProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// URL is the nats:// URL clients connect to.
func (p *NATSProxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Freeze holds every byte through the proxy, both ways, until Thaw.
func (p *NATSProxy) Freeze() { p.setFrozen(true) }

// Thaw lets the bytes held since Freeze flow again.
func (p *NATSProxy) Thaw() { p.setFrozen(false) }

func (p *NATSProxy) setFrozen(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.cond.Broadcast()
	p.mu.Unlock()
}

// pass waits while the proxy is frozen, reporting false once it is closed.
func (p *NATSProxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// Inject writes line to every client connected now, between two messages of
// the server's, and stops forwarding to them.
func (p *NATSProxy) Inject(line string) int {
	p.mu.Lock()
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	for _, c := range clients {
		c.mu.Lock()
		_, _ = io.WriteString(c.client, line)
		c.mu.Unlock()
		_ = c.server.Close()
	}
	return len(clients)
}

// Close stops accepting, closes every connection and waits for the
// forwarding goroutines.
func (p *NATSProxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range clients {
		_ = c.client.Close()
		_ = c.server.Close()
	}
	p.wg.Wait()
}

func (p *NATSProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxied{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.clients = append(p.clients, c)
		p.mu.Unlock()
		p.wg.Go(func() {
			p.upstream(c)
			_ = server.Close()
		})
		p.wg.Go(func() {
			p.forward(c)
			_ = client.Close()
		})
	}
}

// upstream copies what the client sends to the server, holding it while
// the proxy is frozen.
func (p *NATSProxy) upstream(c *proxied) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := c.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forward copies the server's protocol to the client a whole message at a
// time (a control line, and for MSG and HMSG the payload its last field
// sizes), holding it while the proxy is frozen.
func (p *NATSProxy) forward(c *proxied) {
	r := bufio.NewReaderSize(c.server, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		msg := line
		if bytes.HasPrefix(line, []byte("MSG ")) || bytes.HasPrefix(line, []byte("HMSG ")) {
			fields := bytes.Fields(line)
			size, err := strconv.Atoi(string(fields[len(fields)-1]))
			if err != nil || size < 0 {
				return
			}
			payload := make([]byte, size+2) // and its \r\n
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			msg = append(line, payload...)
		}
		if !p.pass() {
			return
		}
		c.mu.Lock()
		_, err = c.client.Write(msg)
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}
