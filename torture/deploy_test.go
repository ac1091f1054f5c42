//go:build unix

package torture

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// deployment is what the suite runs, as deployed: a nats-server process with
// JetStream storing in a temporary directory, three ea-node processes (plus
// spare slots for add-node) each
// connected to it through a proxy of its own (so that its link can be cut),
// and one ea-supervisor with the gateway on, connected directly. Nodes serve
// the record store (their default).
type deployment struct {
	t    testing.TB
	plan plan

	natsAddr  string // the server's client address
	natsStore string // its JetStream store directory
	nats      *proctest.Proc
	natsGen   int

	proxies []*proctest.NATSProxy // per node slot, to the server
	nodes   []*member             // per slot, the node running now
	sup     *member
	gen     int // of node and supervisor processes, for their names
}

// member is a node or supervisor process.
type member struct {
	*proctest.Proc
	id      string // node id (--node-id) or the supervisor's name
	metrics string // its --metrics address
}

// ready reports whether /readyz answers 200.
func (m *member) ready() bool {
	code, _ := proctest.Get("http://" + m.metrics + "/readyz")
	return code == http.StatusOK
}

// deploy starts the server, the nodes and the supervisor and waits until
// each is ready. Everything is stopped at the test's cleanup.
func deploy(t testing.TB, p plan) *deployment {
	t.Helper()
	d := &deployment{t: t, plan: p, natsAddr: proctest.FreeAddr(t), natsStore: t.TempDir()}
	d.startNATS()
	for slot := range p.nodes {
		d.proxies = append(d.proxies, proctest.StartNATSProxy(t, d.natsAddr))
		d.nodes = append(d.nodes, nil)
		if slot < p.nodes-p.spare {
			d.startNode(slot)
		}
	}
	d.startSupervisor()
	d.allReady(60 * time.Second)
	d.waitReady(d.sup, 60*time.Second)
	return d
}

// URL is the server's own URL (not through a proxy).
func (d *deployment) URL() string { return "nats://" + d.natsAddr }

// startNATS starts nats-server on d.natsAddr and waits until it is ready.
func (d *deployment) startNATS() {
	d.t.Helper()
	d.natsGen++
	host, port, _ := strings.Cut(d.natsAddr, ":")
	name := fmt.Sprintf("nats-server-%d", d.natsGen)
	args := []string{"-a", host, "-p", port, "-js", "-sd", d.natsStore, "-n", "torture"}
	for attempt := 1; ; attempt++ {
		p := proctest.Start(d.t, name, bins.natsServer, args, proctest.Environ())
		deadline := time.Now().Add(30 * time.Second)
		for p.Running() && !strings.Contains(p.Stderr.String(), "Server is ready") {
			if time.Now().After(deadline) {
				d.t.Fatalf("%s not ready after 30s:\n%s", name, proctest.Tail(p.Stderr.String(), 30))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if p.Running() {
			d.nats = p
			return
		}
		// The port of a killed predecessor may linger for a moment.
		if attempt == 20 {
			d.t.Fatalf("%s exited at start %d times: %v\n%s", name, attempt, p.Err(), proctest.Tail(p.Stderr.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startNode starts a new node process in slot (a new node id: a restarted
// pod of a Deployment) connected through the slot's proxy.
func (d *deployment) startNode(slot int) *member {
	d.t.Helper()
	d.gen++
	id := fmt.Sprintf("n%d-g%d", slot, d.gen)
	metrics := proctest.FreeAddr(d.t)
	args := []string{
		"--nats", d.proxies[slot].URL(), "--metrics", metrics, "--node-id", id,
		"--heartbeat", d.plan.heartbeat.String(), "--heartbeat-ttl", d.plan.ttl.String(),
		"--partitions", fmt.Sprint(d.plan.partitions), "--idle", "5s", "--shutdown-grace", "5s",
	}
	m := &member{Proc: proctest.Start(d.t, id, bins.node, args, proctest.Environ("EA_")), id: id, metrics: metrics}
	d.nodes[slot] = m
	return m
}

// startSupervisor starts a new supervisor process with the gateway on.
func (d *deployment) startSupervisor() *member {
	d.t.Helper()
	d.gen++
	id := fmt.Sprintf("supervisor-g%d", d.gen)
	metrics := proctest.FreeAddr(d.t)
	args := []string{"--nats", d.URL(), "--metrics", metrics, "--gateway", proctest.FreeAddr(d.t)}
	d.sup = &member{Proc: proctest.Start(d.t, id, bins.supervisor, args, proctest.Environ("EA_")), id: id, metrics: metrics}
	return d.sup
}

// waitReady waits until m's /readyz answers 200, failing the test if it
// exits first or after timeout.
func (d *deployment) waitReady(m *member, timeout time.Duration) {
	d.t.Helper()
	m.WaitHTTP(d.t, timeout, "http://"+m.metrics+"/readyz")
}

// pick returns the slot at or after *next (round-robin) that holds a node
// (running) or is empty (!running), and moves *next past it. A node fault
// needs another node to take over: it fails the test if it would strike the
// last node.
func (d *deployment) pick(next *int, running bool) int {
	d.t.Helper()
	live := 0
	for _, n := range d.nodes {
		if n != nil {
			live++
		}
	}
	if running && live < 2 {
		d.t.Fatalf("the plan strikes a node with %d running: none would take over", live)
	}
	for i := range d.nodes {
		slot := (*next + i) % len(d.nodes)
		if (d.nodes[slot] != nil) == running {
			*next = slot + 1
			return slot
		}
	}
	d.t.Fatal("the plan adds a node with no slot empty: kill one first")
	return 0
}

// allReady waits until every node and the supervisor are ready.
func (d *deployment) allReady(timeout time.Duration) {
	d.t.Helper()
	for _, n := range d.nodes {
		if n != nil {
			d.waitReady(n, timeout)
		}
	}
	d.waitReady(d.sup, timeout)
}

// running fails the test if a process exited by itself.
func (d *deployment) running() {
	d.t.Helper()
	for _, m := range append([]*member{d.sup}, d.nodes...) {
		if m != nil && !m.Running() {
			d.t.Fatalf("%s exited by itself: %v\n%s", m.id, m.Err(), proctest.Tail(m.Stderr.String(), 40))
		}
	}
	if !d.nats.Running() {
		d.t.Fatalf("%s exited by itself: %v", d.nats.Name, d.nats.Err())
	}
}

// kill sends SIGKILL to m and waits for it to exit.
func (d *deployment) kill(p *proctest.Proc) {
	d.t.Helper()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatalf("kill %s: %v", p.Name, err)
	}
	p.Wait(d.t, 30*time.Second)
}

// client connects a plain NATS client to the server directly, reconnecting
// for as long as it takes; it is closed at the test's cleanup.
func (d *deployment) client() (*nats.Conn, jetstream.JetStream) {
	d.t.Helper()
	nc, err := nats.Connect(d.URL(), nats.Name("torture"), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		d.t.Fatal(err)
	}
	return nc, js
}
