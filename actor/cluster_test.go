package actor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterLoad is one record a plain publisher sends: its id is fixed up
// front, so a publish retried after a lost acknowledgement is dropped by
// JetStream's duplicate window instead of being stored twice.
type clusterLoad struct {
	to records.Ref
	id string
}

// publishResilient publishes every load as an inc record with workers
// parallel publishers, retrying each until JetStream acknowledges it (the
// stream may be electing a new leader, the connection moving to another
// server). It counts acknowledged records in acked and returns the first
// record that could not be published by deadline.
func publishResilient(conn *bus.Conn, loads []clusterLoad, workers int, deadline time.Time, acked *atomic.Int64) error {
	jobs := make(chan clusterLoad)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for l := range jobs {
				rec, err := records.New("inc", nil)
				if err != nil {
					errs <- err
					return
				}
				rec.ID = l.id
				msg := rec.Msg(conn.Names().Mailbox(l.to))
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := conn.JetStream().PublishMsg(ctx, msg)
					cancel()
					if err == nil {
						acked.Add(1)
						break
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("publish %s to %s: %w", l.id, l.to, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	var err error
feed:
	for _, l := range loads {
		select {
		case jobs <- l:
		case err = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// clusterPlacement is fast placement for a cluster: heartbeats are KV writes
// to a replicated bucket, which stall for a leader election (about 2s here),
// so a 400ms TTL would have nodes declare each other dead
// whenever a stream leader moves, and fight over effectors.
// clusterPartitions keeps the cluster test's replicated consumers (one Raft
// group each, per kind and partition) few enough for 3 in-process servers on
// a small machine.
const clusterPartitions = 16

var clusterPlacement = actor.Options{Heartbeat: 200 * time.Millisecond, HeartbeatTTL: 2 * time.Second}

// TestClusterStreamLeaderDies runs two nodes against a 3-server NATS cluster
// holding every stream and bucket in 3 replicas. While a plain publisher
// drives 30 counters, the server leading the records stream stops: JetStream
// elects another leader, clients move to the surviving servers, consumers
// that lived on the stopped server are recreated, and processing goes on.
// At the end every count is exact and no outbox holds an output twice.
// Not parallel: three servers in Raft groups and two nodes with a 2s heartbeat TTL; a parallel test slows elections past the deadlines.
func TestClusterStreamLeaderDies(t *testing.T) {
	const (
		counters = 30
		per      = 100
	)
	start := time.Now()
	cl := bustest.NewCluster(t, 3)
	conn := cl.Connect(t, bus.Config{Replicas: 3, Partitions: clusterPartitions})
	if urls := strings.Split(conn.Config().URL, ","); len(urls) != 3 {
		t.Fatalf("connection URL %q: want the 3 servers' URLs", conn.Config().URL)
	}
	names := conn.Names()
	for _, stream := range []string{names.MailboxStream(), names.OutboxStream(), names.DeadStream(), "KV_" + names.StateBucket(), "KV_" + names.PlaceBucket(), "KV_" + names.OrchBucket()} {
		s, err := conn.JetStream().Stream(ctxT(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: %d replicas configured, cluster %+v; want 3 replicas", stream, info.Config.Replicas, info.Cluster)
		}
	}
	c := newClient(t, conn)
	var nodes []*runningNode
	for range 2 {
		nodes = append(nodes, startNodeWith(t, cl.Connect(t, bus.Config{Replicas: 3, Partitions: clusterPartitions}), clusterPlacement, nil))
	}
	actortest.Eventually(t, 10*time.Second, "two nodes see each other", func() bool {
		for _, n := range nodes {
			if metricSum(t, n.Registry, "ea_nodes_live") != 2 {
				return false
			}
		}
		return true
	})
	refs := createCounters(t, c, counters)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Log(n.Debug())
			}
			for _, r := range refs {
				doc, err := c.State(ctxT(t), r)
				t.Logf("%s: seq %d count %d status %s err %v", r, doc.Seq, count(t, c, r), doc.Status, err)
			}
		}
	})

	// Round-robin, so every counter has records before and after the stop.
	var loads []clusterLoad
	for range per {
		for _, r := range refs {
			loads = append(loads, clusterLoad{to: r, id: records.NewID()})
		}
	}
	atStop := leaderDeath{
		cluster: cl, conn: conn, client: c, nodes: nodes,
		stream: names.MailboxStream(), loads: loads, refs: refs, per: per,
		publishFor: 45 * time.Second, settle: 60 * time.Second,
	}.run(t)
	t.Logf("%s in all", time.Since(start).Round(time.Millisecond))
	for i, n := range nodes {
		if p := metricSum(t, n.Registry, "ea_records_processed_total"); p == 0 {
			t.Errorf("node %d processed nothing: the work did not spread", i)
		}
	}
	if after := processedBy(t, nodes); after <= atStop {
		t.Fatalf("nothing processed after the leader stopped (%v before, %v after)", atStop, after)
	}
}

// leaderDeath is a stream leader's death under load, on a cluster where
// nodes run counters.
type leaderDeath struct {
	cluster    *bustest.Cluster
	conn       *bus.Conn
	client     *actor.Client
	nodes      []*runningNode
	stream     string        // the stream whose leader stops
	loads      []clusterLoad // published by 6 resilient publishers
	refs       []records.Ref // the counters, each to count per
	per        int64
	publishFor time.Duration // the publishers give up after
	settle     time.Duration // every count is exact within, after the stop
}

// run publishes the loads, stops the server leading the stream once a third
// of them is acknowledged and a tenth processed, and waits for every count.
// It fails the test when the load was all published before the stop (the
// test would prove nothing), when the stopped server still leads the
// stream, or when a record was lost or applied twice. It returns the
// records the nodes had processed when the leader stopped.
func (d leaderDeath) run(t *testing.T) float64 {
	t.Helper()
	total := int64(len(d.loads))
	var acked atomic.Int64
	published := make(chan error, 1)
	go func() {
		published <- publishResilient(d.conn, d.loads, 6, time.Now().Add(d.publishFor), &acked)
	}()
	actortest.Eventually(t, 30*time.Second, "a third of the load published and some processed", func() bool {
		return acked.Load() >= total/3 && processedBy(t, d.nodes) >= float64(total/10)
	})
	leader := d.cluster.StreamLeader(t, d.stream)
	before, atStop := acked.Load(), processedBy(t, d.nodes)
	leader.Shutdown()
	stopped := time.Now()
	t.Logf("stopped %s, leader of %s, with %d/%d records published and %v processed", leader.Name, d.stream, before, total, atStop)
	if before == total {
		t.Fatal("the load was all published before the leader stopped: the test proves nothing")
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	for _, r := range d.refs {
		waitCountOnly(t, d.client, r, d.per, time.Until(stopped.Add(d.settle)))
	}
	t.Logf("all %d counts exact %s after the leader stopped", len(d.refs), time.Since(stopped).Round(time.Millisecond))
	if next := d.cluster.StreamLeader(t, d.stream); next == leader {
		t.Fatalf("stream %s is still led by the stopped server", d.stream)
	}
	checkExactlyOnce(t, d.conn, d.client, d.refs, d.per)
	return atStop
}

// processedBy is the records the nodes processed, together.
func processedBy(t testing.TB, nodes []*runningNode) float64 {
	var sum float64
	for _, n := range nodes {
		sum += metricSum(t, n.Registry, "ea_records_processed_total")
	}
	return sum
}

// checkExactlyOnce checks that each counter of refs emitted exactly per
// outputs, each id once, and still counts per after they were read: no
// record lost or applied twice.
func checkExactlyOnce(t *testing.T, conn *bus.Conn, c *actor.Client, refs []records.Ref, per int64) {
	t.Helper()
	outs := outboxes(t, conn, "counter")
	for _, r := range refs {
		if got := len(outs[r.String()]); int64(got) != per {
			t.Fatalf("%s: %d outputs, want %d", r, got, per)
		}
		if got := count(t, c, r); got != per {
			t.Fatalf("count of %s is %d after its outputs were read, want %d: a record was applied again", r, got, per)
		}
	}
}

// outboxes returns the ids of the records on every outbox of kind, by
// effector (<kind>/<id>), read from every outbox stream of conn's layout
// and from the one outbox stream a move to stream groups retired (its
// outputs from before the move), failing t on an id stored twice for one
// effector. Right after a leader change the JetStream API may briefly fail;
// it reads everything again then, for up to 30s.
func outboxes(t *testing.T, conn *bus.Conn, kind string) map[string][]string {
	t.Helper()
	n := conn.Names()
	one, _ := n.WithGroups(1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		outs := map[string][]string{}
		seen := map[string]bool{}
		err := readOutboxes(t, conn, n.OutboxStreams(), n.KindOutboxes(kind), outs, seen)
		if err == nil && n.Groups() > 1 {
			err = readOutboxes(t, conn, []string{one.OutboxStream()}, one.KindOutboxes(kind), outs, seen)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				err = nil // provisioned with groups from the start
			}
		}
		if err == nil {
			return outs
		}
		if time.Now().After(deadline) {
			t.Fatalf("read the outboxes of %s: %v", kind, err)
		}
		t.Logf("read the outboxes of %s: %v; reading again", kind, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// readOutboxes adds the ids of the records on filter in streams to outs, by
// effector, failing t on an id seen already for its effector.
func readOutboxes(t *testing.T, conn *bus.Conn, streams []string, filter string, outs map[string][]string, seen map[string]bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range streams {
		stream, err := conn.JetStream().Stream(ctx, name)
		if err != nil {
			return err
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return err
		}
		var total uint64
		for _, n := range info.State.Subjects {
			total += n
		}
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
		if err != nil {
			return err
		}
		for read := uint64(0); read < total; {
			batch, err := cons.Fetch(int(min(total-read, 1000)), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				return err
			}
			for msg := range batch.Messages() {
				ref, ok := conn.Names().RefOf(msg.Subject())
				if !ok {
					one, _ := conn.Names().WithGroups(1)
					ref, ok = one.RefOf(msg.Subject())
				}
				if !ok {
					t.Fatalf("output on %s in %s: not an outbox subject", msg.Subject(), name)
				}
				id := msg.Headers().Get(records.HeaderID)
				if seen[ref.String()+" "+id] {
					t.Fatalf("output %s of %s stored twice (again on %s in %s)", id, ref, msg.Subject(), name)
				}
				seen[ref.String()+" "+id] = true
				outs[ref.String()] = append(outs[ref.String()], id)
				read++
			}
			if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
				return err
			}
		}
	}
	return nil
}
