package actor_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runningNode is a node running in the background of a test.
type runningNode = actortest.Node

// startNode runs a node hosting defs (the example kinds when none) on conn
// and waits until it is ready. setup, if given, runs before Run.
func startNode(t testing.TB, conn *bus.Conn, setup func(*actor.Node), defs ...actor.Definition) *runningNode {
	t.Helper()
	return startNodeWith(t, conn, actor.Options{}, setup, defs...)
}

// startNodeWith is startNode with options (a registry and a 5s shutdown
// grace unless set).
func startNodeWith(t testing.TB, conn *bus.Conn, opts actor.Options, setup func(*actor.Node), defs ...actor.Definition) *runningNode {
	t.Helper()
	if len(defs) == 0 {
		defs = []actor.Definition{kinds.Counter(), kinds.Controller()}
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	opts.ShutdownGrace = cmp.Or(opts.ShutdownGrace, 5*time.Second)
	n, err := actor.NewNode(conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Host(defs...); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(n)
	}
	r := actortest.Run(t, n)
	r.Registry = reg
	return r
}

// newClient returns a client on conn.
func newClient(t testing.TB, conn *bus.Conn) *actor.Client {
	t.Helper()
	c, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func ref(kind, id string) records.Ref { return records.Ref{Kind: kind, ID: id} }

// count reads a counter's count from its state document.
func count(t testing.TB, c *actor.Client, r records.Ref) int64 {
	t.Helper()
	doc, err := c.State(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var s kinds.CounterState
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Count
}

// waitCount waits until counter r reaches want, failing if it overshoots.
func waitCount(t testing.TB, c *actor.Client, r records.Ref, want int64, timeout time.Duration) {
	t.Helper()
	var got int64
	actortest.Eventually(t, timeout, "count of "+r.String(), func() bool {
		got = count(t, c, r)
		if got > want {
			t.Fatalf("count of %s is %d, above %d: a record was applied twice", r, got, want)
		}
		return got == want
	})
}

// publishIncs publishes n inc records to r's mailbox as fast as JetStream
// takes them, the way an outside client would.
func publishIncs(t testing.TB, conn *bus.Conn, r records.Ref, n int) {
	t.Helper()
	subject := conn.Names().Mailbox(r)
	var futures []jetstream.PubAckFuture
	for i := range n {
		rec, err := records.New("inc", nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := conn.JS.PublishMsgAsync(rec.Msg(subject))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
		if i%1000 == 999 {
			waitAcks(t, futures)
			futures = futures[:0]
		}
	}
	waitAcks(t, futures)
}

func waitAcks(t testing.TB, futures []jetstream.PubAckFuture) {
	t.Helper()
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("publish ack timed out")
		}
	}
}

// outputs returns the ids of every record stored on subject, failing on a
// duplicate id.
func outputs(t testing.TB, conn *bus.Conn, subject string) []string {
	t.Helper()
	ctx := ctxT(t)
	names := conn.Names()
	streamName, open := names.OutboxStream(), conn.OutboxStream
	if r, ok := names.RefOf(subject); ok && subject == names.Mailbox(r) {
		// Mailbox records are stored under their partition's subject.
		streamName, open, subject = names.MailboxStream(), conn.MailboxStream, names.StoredMailbox(r)
	}
	cons, err := conn.JS.OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	total := info.State.Subjects[subject]
	seen := map[string]bool{}
	var ids []string
	for uint64(len(ids)) < total {
		batch, err := cons.Fetch(int(min(total-uint64(len(ids)), 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			id := msg.Headers().Get(records.HeaderID)
			if seen[id] {
				t.Fatalf("duplicate output %s on %s", id, subject)
			}
			seen[id] = true
			ids = append(ids, id)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
	}
	return ids
}

// server starts an embedded JetStream server and a provisioned connection.
func server(t testing.TB) (*bustest.Server, *bus.Conn) {
	t.Helper()
	srv := bustest.NewServer(t)
	return srv, srv.Connect(t)
}

// metricSum sums the counters or gauges named name in reg whose labels
// include the given name/value pairs; 0 when there is none.
func metricSum(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}) {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
