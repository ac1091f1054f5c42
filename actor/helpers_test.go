package actor_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// ctxT is a context for one call or one test, ended at cleanup: a deadline
// for a loaded machine (tests run in parallel), not a wait.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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

// waitCount waits until counter r, created with count 0 and sent incs of 1,
// reaches want, failing if it overshoots; then it checks that the outbox
// holds exactly want outputs saying 1..want (checkCountOutputs) and that the
// count is still want, so that a last record applied twice does not escape.
func waitCount(t testing.TB, conn *bus.Conn, c *actor.Client, r records.Ref, want int64, timeout time.Duration) {
	t.Helper()
	waitCountSaid(t, conn, c, r, want, upTo(want), timeout)
}

// waitCountSaid is waitCount for a counter whose outputs say other counts
// than 1..want (incs by more than 1, a state set by create or reset, records
// that went to dead letters): once it reaches want, its outbox holds exactly
// the outputs said, one per count listed, in any order.
func waitCountSaid(t testing.TB, conn *bus.Conn, c *actor.Client, r records.Ref, want int64, said []int64, timeout time.Duration) {
	t.Helper()
	waitCountOnly(t, c, r, want, timeout)
	checkCountOutputs(t, conn, r, said)
	if got := count(t, c, r); got != want {
		t.Fatalf("count of %s is %d after its outputs were read, want %d: a record was applied again", r, got, want)
	}
}

// waitCounts waits until every counter of refs (all of one kind, created
// with count 0 and sent incs of 1) reaches want, failing if one overshoots;
// then it checks that each outbox holds exactly want outputs
// (checkOutboxSizes) and that the counts are still want.
func waitCounts(t testing.TB, conn *bus.Conn, c *actor.Client, refs []records.Ref, want int64, timeout time.Duration) {
	t.Helper()
	waitCountsOnly(t, c, refs, want, timeout)
	checkOutboxSizes(t, conn, refs, want)
	for _, r := range refs {
		if got := count(t, c, r); got != want {
			t.Fatalf("count of %s is %d after its outputs were counted, want %d: a record was applied again", r, got, want)
		}
	}
}

// waitCountsOnly waits until every counter of refs reaches want, failing if
// one overshoots; it does not look at the outboxes.
func waitCountsOnly(t testing.TB, c *actor.Client, refs []records.Ref, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, r := range refs {
		waitCountOnly(t, c, r, want, time.Until(deadline))
	}
}

// checkOutboxSizes checks that the outbox of every counter of refs (all of
// one kind) holds exactly want records, from the stream's count of each
// subject: one more is a record applied twice (checkCountOutputs reads what
// each says, for the stricter check).
func checkOutboxSizes(t testing.TB, conn *bus.Conn, refs []records.Ref, want int64) {
	t.Helper()
	if len(refs) == 0 {
		return
	}
	ctx := ctxT(t)
	stream, err := conn.OutboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(conn.Names().KindOutboxes(refs[0].Kind)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if got := info.State.Subjects[conn.Names().Outbox(r)]; got != uint64(want) {
			t.Fatalf("outbox of %s holds %d records, want exactly %d", r, got, want)
		}
	}
}

// upTo returns 1..n.
func upTo(n int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i) + 1
	}
	return s
}

// waitCountOnly waits until counter r reaches want, failing if it
// overshoots; it does not look at the outbox.
func waitCountOnly(t testing.TB, c *actor.Client, r records.Ref, want int64, timeout time.Duration) {
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

// checkCountOutputs checks that counter r's outbox holds exactly the outputs
// said: one "count" output per count listed, in any order. A count said
// twice is a record applied twice, or applied on a state that missed one (a
// stale output); one output too many is a record applied twice after the
// last.
func checkCountOutputs(t testing.TB, conn *bus.Conn, r records.Ref, said []int64) {
	t.Helper()
	subject := conn.Names().Outbox(r)
	checkSaid(t, r, countOutputs(t, conn, subject)[subject], said)
}

// saidCounts returns the counts counter r's outputs say, in increasing order.
func saidCounts(t testing.TB, conn *bus.Conn, r records.Ref) []int64 {
	t.Helper()
	subject := conn.Names().Outbox(r)
	var said []int64
	for _, o := range countOutputs(t, conn, subject)[subject] {
		said = append(said, o.count)
	}
	slices.Sort(said)
	return said
}

// countOutput is one "count" output: its record id and the count it says.
type countOutput struct {
	id    string
	count int64
}

// checkSaid checks the outputs of counter r read by countOutputs: one per
// count of want, in any order.
func checkSaid(t testing.TB, r records.Ref, outs []countOutput, want []int64) {
	t.Helper()
	left := map[int64]int{}
	for _, n := range want {
		left[n]++
	}
	by := map[int64]string{}
	for _, o := range outs {
		if left[o.count] == 0 {
			if other, ok := by[o.count]; ok {
				t.Fatalf("%s: outputs %s and %s both say count %d: a record was applied twice, or on a state that missed one", r, other, o.id, o.count)
			}
			t.Fatalf("%s: output %s says count %d, which no record should have made", r, o.id, o.count)
		}
		left[o.count]--
		by[o.count] = o.id
	}
	if len(outs) != len(want) {
		t.Fatalf("%s: %d outputs, want exactly %d", r, len(outs), len(want))
	}
}

// countOutputs reads every output stored under filter on the outbox stream
// (as many as the stream holds when it starts), by subject, failing on an id
// stored twice or an output that is not a "count".
func countOutputs(t testing.TB, conn *bus.Conn, filter string) map[string][]countOutput {
	t.Helper()
	ctx := ctxT(t)
	stream, err := conn.OutboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	out := map[string][]countOutput{}
	if total == 0 {
		return out
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for read := uint64(0); read < total; {
		batch, err := cons.Fetch(int(min(total-read, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			read++
			rec, err := records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
			if err != nil {
				t.Fatalf("output on %s: %v", msg.Subject(), err)
			}
			if seen[msg.Subject()+" "+rec.ID] {
				t.Fatalf("output %s stored twice on %s", rec.ID, msg.Subject())
			}
			seen[msg.Subject()+" "+rec.ID] = true
			if rec.Type != "count" {
				t.Fatalf("output %s on %s is a %q, want a count", rec.ID, msg.Subject(), rec.Type)
			}
			var c kinds.Count
			if err := rec.Decode(&c); err != nil {
				t.Fatalf("output %s on %s: %v", rec.ID, msg.Subject(), err)
			}
			out[msg.Subject()] = append(out[msg.Subject()], countOutput{id: rec.ID, count: c.Count})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
	}
	return out
}

// publishIncs publishes n inc records to r's mailbox as fast as JetStream
// takes them, the way an outside client would.
func publishIncs(t testing.TB, conn *bus.Conn, r records.Ref, n int) {
	t.Helper()
	if err := tryPublishIncs(conn, r, n); err != nil {
		t.Fatal(err)
	}
}

// tryPublishIncs is publishIncs for a goroutine other than the test's: it
// returns the first error instead of failing the test.
func tryPublishIncs(conn *bus.Conn, r records.Ref, n int) error {
	subject := conn.Names().Mailbox(r)
	var futures []jetstream.PubAckFuture
	for i := range n {
		rec, err := records.New("inc", nil)
		if err != nil {
			return err
		}
		f, err := conn.JetStream().PublishMsgAsync(rec.Msg(subject))
		if err != nil {
			return fmt.Errorf("publish to %s: %w", r, err)
		}
		futures = append(futures, f)
		if i%1000 == 999 {
			if err := waitAcks(futures); err != nil {
				return err
			}
			futures = futures[:0]
		}
	}
	return waitAcks(futures)
}

// waitAcks waits for the acknowledgement of every publish of futures.
func waitAcks(futures []jetstream.PubAckFuture) error {
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", f.Msg().Subject, err)
		case <-time.After(2 * time.Minute): // a deadline for a loaded machine
			return fmt.Errorf("publish to %s: no ack within 2m", f.Msg().Subject)
		}
	}
	return nil
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
	cons, err := conn.JetStream().OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
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

// outputSeqs reads the records on an outbox subject in stream order, each
// one's data a record sequence (as the tally kinds of batch_test.go emit).
func outputSeqs(t testing.TB, conn *bus.Conn, subject string) []uint64 {
	t.Helper()
	ctx := ctxT(t)
	cons, err := conn.JetStream().OrderedConsumer(ctx, conn.Names().OutboxStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	total := len(outputs(t, conn, subject))
	var seqs []uint64
	for len(seqs) < total {
		batch, err := cons.Fetch(total-len(seqs), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			rec, err := records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			var seq uint64
			if err := rec.Decode(&seq); err != nil {
				t.Fatalf("output %s: %v", rec.ID, err)
			}
			seqs = append(seqs, seq)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
	}
	return seqs
}

// server starts an embedded JetStream server and a provisioned connection,
// with bustest.Partitions (8) partitions a kind: fewer partitions to open
// make a node ready in a fraction of the time, and put more effectors in
// each partition, which is where takeovers go wrong (records were lost that
// way once: fence.go, resetFenced). The tests about spread at the default
// count (TestSpreadOverNodes) or about throughput across many partitions
// (TestHundredCountersInParallel) ask for 64 with serverWith.
func server(t testing.TB) (*bustest.Server, *bus.Conn) {
	t.Helper()
	return serverWith(t, bus.Config{})
}

// serverWith is server with the connection's configuration.
func serverWith(t testing.TB, cfg bus.Config) (*bustest.Server, *bus.Conn) {
	t.Helper()
	srv := bustest.NewServer(t)
	return srv, srv.Connect(t, cfg)
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
