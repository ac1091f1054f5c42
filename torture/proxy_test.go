//go:build unix

package torture

import (
	"net"
	"sync"
	"testing"
)

// proxy forwards every TCP connection made to its loopback address to
// target, and can cut the network between them: while cut, no byte crosses
// in either direction (bytes are held, as TCP holds them across a partition
// that heals before its timeouts) and new connections are accepted but carry
// nothing, so neither end sees the connection close. It needs no privileges,
// which network namespaces would.
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	healed chan struct{}         // closed when not cut; a new one on each cut
	conns  map[net.Conn]struct{} // both ends of every forwarded connection
	closed bool

	wg sync.WaitGroup // the accept loop and two pipes per connection
}

// newProxy starts a proxy to target on a free loopback port; it is closed at
// the test's cleanup.
func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healed := make(chan struct{})
	close(healed)
	p := &proxy{ln: ln, target: target, healed: healed, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the NATS URL of the proxy.
func (p *proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut stops every byte through the proxy until Heal.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut = true
		p.healed = make(chan struct{})
	}
}

// Heal lets the bytes held since Cut flow again.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.healed)
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil { // the server is down: the client sees a refusal
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// track registers a connection pair, reporting false (having closed both)
// if the proxy is closed.
func (p *proxy) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		_ = up.Close()
		return false
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	return true
}

// pipe copies src to dst, holding what it read while the proxy is cut; when
// either end fails it closes both.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.drop(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the proxy is cut, reporting false if it was closed.
func (p *proxy) pass() bool {
	for {
		p.mu.Lock()
		healed, closed := p.healed, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		<-healed
		p.mu.Lock()
		cut, closed := p.cut, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !cut {
			return true
		}
	}
}

func (p *proxy) drop(a, b net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range []net.Conn{a, b} {
		_ = c.Close() // the other pipe may have closed it first
		delete(p.conns, c)
	}
}

// close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		for c := range p.conns {
			_ = c.Close()
		}
		if p.cut {
			p.cut = false
			close(p.healed)
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}
