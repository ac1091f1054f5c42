package actor_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// connectVia connects with cfg to the server through url (a proctest.NATSProxy's) and
// provisions, closing the connection at cleanup.
func connectVia(t testing.TB, url string, cfg bus.Config) *bus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.URL = url
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	return conn
}

// leaseWatch follows the partition leases in the placement bucket.
type leaseWatch struct {
	mu     sync.Mutex
	holder map[string]string // lease key → node
}

// watchLeases follows the partition leases until the test ends, and returns
// once it has their values.
func watchLeases(t testing.TB, conn *bus.Conn) *leaseWatch {
	t.Helper()
	kv, err := conn.JetStream().KeyValue(ctxT(t), conn.Names().PlaceBucket())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kv.Watch(ctx, conn.Names().LeaseKeys())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	lw := &leaseWatch{holder: map[string]string{}}
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		once := sync.OnceFunc(func() { close(ready) })
		defer once()
		for e := range w.Updates() {
			if e == nil {
				once()
				continue
			}
			var doc struct {
				Node string `json:"node"`
			}
			lw.mu.Lock()
			if e.Operation() == jetstream.KeyValuePut && codec.Unmarshal(e.Value(), &doc) == nil {
				lw.holder[e.Key()] = doc.Node
			} else {
				delete(lw.holder, e.Key())
			}
			lw.mu.Unlock()
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-ready
	return lw
}

// holders returns lease key → node.
func (lw *leaseWatch) holders() map[string]string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return maps.Clone(lw.holder)
}

// TestFrozenNodeIsFenced runs two nodes, one of them behind a proxy that
// freezes its connection for three lease TTLs while records flow: the
// server keeps the frozen node's connection and pull requests, as for a
// stopped process or a network cut it has not noticed.
//
//   - The other node processes the frozen node's partitions within the TTL
//     plus a second of the freeze: the new reader fences the old one off at
//     the server, so the old reader's waiting pull requests do not hold the
//     records hostage (before, they were served first, the new reader saw a
//     consumer sequence gap and reset, again and again, until they expired).
//   - Thawed, within a beat or two, every lease has a holder and each node
//     reads exactly the partitions whose lease names it (before, leases the
//     other node gave back while the thawed node still read stayed free).
//   - Every count is exact and every output said once.
//
// Not parallel: it measures how soon leases move after a freeze, against the heartbeat TTL.
func TestFrozenNodeIsFenced(t *testing.T) {
	const beat, ttl = 250 * time.Millisecond, 1500 * time.Millisecond
	opts := actor.Options{Heartbeat: beat, HeartbeatTTL: ttl}
	// 16 partitions a kind, not 64: what is measured is the fence, not how
	// fast a loaded machine opens partitions.
	cfg := bus.Config{Partitions: 16}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, cfg)
	c := newClient(t, conn)
	proxy := proctest.StartNATSProxy(t, strings.TrimPrefix(srv.URL, "nats://"))
	frozenConn := connectVia(t, proxy.URL(), cfg)
	frozen := startNodeWith(t, frozenConn, opts, nil)
	other := startNodeWith(t, srv.Connect(t, cfg), opts, nil)
	nodes := []*runningNode{frozen, other}
	leases := watchLeases(t, conn)
	partitions := 2 * conn.Names().Partitions() // counter and controller
	// held: every lease has a holder and each node reads only partitions
	// whose lease names it; settled: and each reads all of them.
	check := func(exact bool) (bool, string) {
		held := leases.holders()
		var why []string
		if len(held) != partitions {
			why = append(why, fmt.Sprintf("%d of %d leases have a holder", len(held), partitions))
		}
		for _, n := range nodes {
			named, wrong := 0, 0
			for _, h := range held {
				if h == n.Node.ID() {
					named++
				}
			}
			keys := n.Node.ReadingKeys()
			for _, k := range keys {
				if held[k] != n.Node.ID() {
					wrong++
				}
			}
			if wrong > 0 {
				why = append(why, fmt.Sprintf("node %s reads %d partitions whose lease does not name it", n.Node.ID(), wrong))
			}
			if exact && len(keys) != named {
				why = append(why, fmt.Sprintf("node %s reads %d partitions, %d leases name it", n.Node.ID(), len(keys), named))
			}
		}
		return len(why) == 0, strings.Join(why, "; ")
	}
	held := func() (bool, string) { return check(false) }
	settled := func() (bool, string) { return check(true) }
	actortest.Eventually(t, 20*time.Second, "both nodes read, each what its leases name", func() bool {
		ok, _ := settled()
		return ok && frozen.Reading() > 0 && other.Reading() > 0
	})
	refs := createCounters(t, c, 40)
	publishAll(t, conn, refs, 5)
	waitCounts(t, conn, c, refs, 5, 30*time.Second)
	holders := leases.holders()
	var hostages []records.Ref
	for _, r := range refs {
		if holders[conn.Names().LeaseKey(r.Kind, conn.Names().Partition(r))] == frozen.Node.ID() {
			hostages = append(hostages, r)
		}
	}
	if len(hostages) == 0 {
		t.Fatal("the node to freeze reads no counter's partition: the test proves nothing")
	}

	// The first output of each counter after the freeze, as it arrives.
	var outMu sync.Mutex
	firstOut := map[string]time.Time{}
	var frozeAt time.Time
	sub, err := conn.NATS().Subscribe(conn.Names().KindOutboxes("counter"), func(m *nats.Msg) {
		now := time.Now()
		r, ok := conn.Names().RefOf(m.Subject)
		outMu.Lock()
		defer outMu.Unlock()
		if _, seen := firstOut[r.ID]; ok && !seen && !frozeAt.IsZero() {
			firstOut[r.ID] = now
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}

	// Freeze, then keep records coming to every counter.
	proxy.Freeze()
	outMu.Lock()
	frozeAt = time.Now()
	outMu.Unlock()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			proxy.Thaw()
		}
	}
	defer thaw()
	ctx, stop := context.WithCancel(ctxT(t))
	var load sync.WaitGroup
	sent := make([]int, len(refs)) // incs beyond the first 5, per counter
	load.Go(func() {
		for round := 0; ctx.Err() == nil; round++ {
			for i, r := range refs {
				publishIncs(t, conn, r, 1)
				sent[i]++
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	defer func() { stop(); load.Wait() }()

	took := map[records.Ref]time.Duration{}
	var moved time.Duration // when no lease named the frozen node any more
	var dead time.Duration  // when the other node saw it dead
	for len(took) < len(hostages) && time.Since(frozeAt) < 3*ttl {
		if dead == 0 && metricSum(t, other.Registry, "ea_nodes_live") == 1 {
			dead = time.Since(frozeAt)
		}
		if moved == 0 && countOf(leases.holders(), frozen.Node.ID()) == 0 {
			moved = time.Since(frozeAt)
		}
		outMu.Lock()
		for _, r := range hostages {
			if at, ok := firstOut[r.ID]; ok {
				took[r] = at.Sub(frozeAt)
			}
		}
		outMu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	var times []time.Duration
	for _, d := range took {
		times = append(times, d)
	}
	slices.Sort(times)
	t.Logf("frozen node read %d partitions; seen dead after %s, its leases all moved after %s; %d of its %d counters applied records again, on the other node, after %v",
		countOf(holders, frozen.Node.ID()), dead, moved, len(took), len(hostages), times)
	// The goal is the TTL plus a second from the freeze to processing. What
	// the fence decides is the part after the leases moved; how soon they
	// move is the heartbeat's business, and on a loaded machine (two cores,
	// the race detector) seeing a node dead can take a few hundred
	// milliseconds beyond the TTL. So: the leases move within the TTL plus
	// a second, and processing follows them within a second.
	switch {
	case len(took) < len(hostages):
		t.Errorf("only %d of %d counters of the frozen node's partitions applied a record within 3 TTLs of the freeze", len(took), len(hostages))
	case moved == 0 || moved > ttl+time.Second:
		t.Errorf("the frozen node's leases moved after %s (0: not within 3 TTLs), want within the TTL plus 1s (%s)", moved, ttl+time.Second)
	case times[len(times)-1] > moved+time.Second:
		t.Errorf("the last counter of the frozen node's partitions applied a record %s after the freeze, %s after its leases moved: want within 1s",
			times[len(times)-1], times[len(times)-1]-moved)
	}

	// Thaw after three TTLs.
	time.Sleep(time.Until(frozeAt.Add(3 * ttl)))
	thaw()
	thawedAt := time.Now()
	deadline := thawedAt.Add(beat + time.Second)
	for {
		ok, why := held()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s after the thaw: %s", time.Since(thawedAt).Round(time.Millisecond), why)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("after the thaw every lease had a holder and each node read only partitions whose lease names it within %s", time.Since(thawedAt).Round(time.Millisecond))
	// From then on it stays so, and each node soon reads all its leases name.
	for !func() bool { ok, _ := settled(); return ok }() {
		if ok, why := held(); !ok {
			// The test's view of the leases may lag a node's for a moment.
			actortest.Eventually(t, 2*time.Second, fmt.Sprintf("%s after the thaw: %s, to pass", time.Since(thawedAt).Round(time.Millisecond), why),
				func() bool { ok, _ := held(); return ok })
		}
		if time.Since(thawedAt) > 30*time.Second {
			_, why := settled()
			t.Fatalf("30s after the thaw: %s", why)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("each node read all the partitions its leases name %s after the thaw", time.Since(thawedAt).Round(time.Millisecond))

	stop()
	load.Wait()
	for i, r := range refs {
		waitCount(t, conn, c, r, int64(5+sent[i]), time.Minute)
	}
}

func countOf(held map[string]string, node string) int {
	n := 0
	for _, h := range held {
		if h == node {
			n++
		}
	}
	return n
}

// TestPinlessFormerReader: a former reader of a partition whose pull
// requests carry no pin id (a reader's next request after a 423 carries
// none) is served by the server as soon as the pin is free: after the new
// reader's unpin, before or right after its reset, and whenever the pin
// expires. This one never acknowledges what it takes, so those records come
// again only after the ack wait, behind later ones the node may have
// applied meanwhile. The node must notice every delivery it did not get and
// read the partition again from its ack floor: each record applied exactly
// once, none skipped as if applied.
func TestPinlessFormerReader(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	r := ref("counter", "stolen")
	// A first node makes the partition consumers and the counter, then
	// stops.
	first := actortest.StartNode(t, conn, actor.Options{}, kinds.Counter())
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	first.Stop(t)

	// The former reader: a pin-less request for up to 100 records every
	// 50ms, each waiting up to 500ms, never acknowledging what it gets.
	nc := conn.NATS()
	names := conn.Names()
	next := fmt.Sprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", names.MailboxStream(), names.PartitionConsumer(r.Kind, names.Partition(r)))
	req := []byte(`{"batch":100,"expires":500000000,"group":"reader"}`)
	var taken atomic.Int64
	inbox := nc.NewInbox()
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		if m.Header.Get("Status") == "" {
			taken.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			_ = nc.PublishRequest(next, inbox, req)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	leave := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
		_ = sub.Unsubscribe()
	})
	defer leave()

	const wave, waves = 50, 6
	publishIncs(t, conn, r, wave)
	actortest.Eventually(t, 10*time.Second, "the former reader took records", func() bool { return taken.Load() > 0 })
	// The node takes over while the former reader still pulls; then the
	// former reader is gone, with records it took and did not acknowledge
	// (they come again after the kind's ack wait, 30s), and more records
	// come.
	startNodeWith(t, conn, actor.Options{}, nil, kinds.Counter())
	time.Sleep(time.Second)
	leave()
	for range waves - 1 {
		publishIncs(t, conn, r, wave)
	}
	t.Logf("the former reader took %d deliveries", taken.Load())
	waitCount(t, conn, c, r, wave*waves, 20*time.Second)
}
