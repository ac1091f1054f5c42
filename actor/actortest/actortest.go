// Package actortest runs a real [actor.Node] in a test, in one line, the way
// httptest starts an HTTP server:
//
//	srv := bustest.NewServer(t)
//	n := actortest.StartNode(t, srv.Connect(t), actor.Options{}, kinds.Counter())
//	// n is ready: its kinds serve their control endpoints and consume
//
// The node runs in the background until the test ends, when it is stopped
// gracefully; the test fails if Run returns an error or the node does not stop
// within a minute. [Node.Registry] holds the node's Prometheus metrics.
//
// [Create] creates an effector and terminates it when the test ends.
//
// [Eventually] polls a condition with a deadline, for tests that must wait for
// something to happen without sleeping.
package actortest

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/prometheus/client_golang/prometheus"
)

// Timeouts of the helpers.
const (
	// ReadyTimeout is how long StartNode and Run wait at most for the node
	// to be ready (they return as soon as it is): long, for tests running
	// in parallel on a small, loaded machine.
	ReadyTimeout = 90 * time.Second
	// StopTimeout is how long Stop waits for Run to return.
	StopTimeout = 60 * time.Second
	// ShutdownGrace is the node's shutdown grace unless Options set one.
	ShutdownGrace = 5 * time.Second
	// PollInterval is how often Eventually checks its condition.
	PollInterval = 10 * time.Millisecond
)

// Node is an [actor.Node] running in the background of a test.
type Node struct {
	*actor.Node
	// Registry holds the node's metrics: a new registry unless the Options
	// given to StartNode had a Registerer (then that one if it is a
	// *prometheus.Registry, else nil).
	Registry *prometheus.Registry

	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// StartNode creates a node on conn with opts (a new Prometheus registry and a
// 5s shutdown grace unless set), hosts defs, runs it in the background and
// waits until it is ready. The node is stopped at t.Cleanup.
func StartNode(t testing.TB, conn *bus.Conn, opts actor.Options, defs ...actor.Definition) *Node {
	t.Helper()
	if conn == nil {
		t.Fatal("actortest: StartNode needs a connection: pass the *bus.Conn of bustest.Server.Connect")
	}
	if len(defs) == 0 {
		t.Fatal("actortest: StartNode needs at least one kind to host: pass the actor.Definition of each")
	}
	var reg *prometheus.Registry
	if opts.Registerer == nil {
		reg = prometheus.NewRegistry()
		opts.Registerer = reg
	} else {
		reg, _ = opts.Registerer.(*prometheus.Registry)
	}
	opts.ShutdownGrace = cmp.Or(opts.ShutdownGrace, ShutdownGrace)
	n, err := actor.NewNode(conn, opts)
	if err != nil {
		t.Fatalf("actortest: new node: %v", err)
	}
	if err := n.Host(defs...); err != nil {
		t.Fatalf("actortest: host: %v", err)
	}
	r := Run(t, n)
	r.Registry = reg
	return r
}

// Run runs n, created and hosting its kinds already, in the background and
// waits until it is ready; use it when the node needs setting up between
// NewNode and Run. The node is stopped at t.Cleanup. Registry is nil.
func Run(t testing.TB, n *actor.Node) *Node {
	t.Helper()
	if n == nil {
		t.Fatal("actortest: Run needs a node: pass the *actor.Node of actor.NewNode")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Node{Node: n, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- n.Run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	Eventually(t, ReadyTimeout, "node ready", func() bool {
		select {
		case err := <-r.done:
			r.done <- nil // let Stop return at cleanup
			t.Fatalf("node Run returned early: %v", err)
		default:
		}
		return n.Ready()
	})
	return r
}

// Stop stops the node gracefully and waits for Run to return, failing the
// test if Run returns an error or takes longer than StopTimeout. Calls after
// the first do nothing.
func (r *Node) Stop(t testing.TB) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("node Run: %v", err)
			}
		case <-time.After(StopTimeout):
			t.Errorf("node did not stop within %s", StopTimeout)
		}
	})
}

// Eventually polls cond every 10ms until it holds, failing the test with
// what in the message if timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(PollInterval)
	}
}

// Create creates effector ref through c with state (nil for the kind's
// initial state), failing the test if it cannot, and terminates it when the
// test ends, so that tests sharing one server leave no live effector behind
// for the next. It returns the new state document.
func Create(t testing.TB, c *actor.Client, ref records.Ref, state any) actor.Document {
	t.Helper()
	if c == nil {
		t.Fatal("actortest: Create needs a client: pass the *actor.Client of actor.NewClient")
	}
	doc, err := c.Create(context.Background(), ref, state)
	if err != nil {
		t.Fatalf("actortest: create %s: %v", ref, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if _, err := c.Terminate(ctx, ref); err != nil && !errors.Is(err, actor.ErrNotFound) {
			t.Errorf("actortest: terminate %s at cleanup: %v", ref, err)
		}
	})
	return doc
}
