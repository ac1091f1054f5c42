package actor_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type tally struct {
	Seen []uint64 `json:"seen"`
}

// TestBatchWithTransientFailures: records waiting for one effector are
// applied in batches; when the logic fails once on a record in the middle of
// a batch, the records before it are committed, it is retried on its own
// with backoff, and batching goes on after it. Every record is applied once,
// in stream order, and nothing goes to dead letters.
func TestBatchWithTransientFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failed := map[uint64]bool{}
	kind := actor.Kind[tally]{
		Name:  "tally",
		Retry: actor.RetryPolicy{Backoff: 5 * time.Millisecond},
		Logic: func(ctx *actor.Context, s tally) (tally, error) {
			seq := ctx.Record().Seq
			mu.Lock()
			first := seq%7 == 0 && !failed[seq]
			failed[seq] = true
			mu.Unlock()
			if first {
				return s, errTransient
			}
			s.Seen = append(s.Seen, seq)
			return s, nil
		},
	}
	_, conn := server(t)
	n := startNode(t, conn, nil, kind)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	const total = 300
	publishIncs(t, conn, r, total)
	awaitTally(t, c, r, total, 3*time.Minute)
	if got := metricSum(t, n.Registry, "ea_logic_retries_total", "kind", "tally"); got < total/7-1 {
		t.Fatalf("%v retries, want about %d: the failures were not retried", got, total/7)
	}
	if got := metricSum(t, n.Registry, "ea_dead_letters_total"); got != 0 {
		t.Fatalf("%v dead letters, want none", got)
	}
	// The count moves once a batch is acknowledged, just after its state
	// write shows: wait for it, then want it exact.
	processed := func() float64 {
		return metricSum(t, n.Registry, "ea_records_processed_total", "kind", "tally", "outcome", "ok")
	}
	actortest.Eventually(t, 10*time.Second, "every record counted", func() bool { return processed() >= total })
	if got := processed(); got != total {
		t.Fatalf("ea_records_processed_total{ok} = %v, want %d", got, total)
	}
	// Batches happened: the state document was written far fewer times than
	// there were records (only this effector writes to the bucket here).
	bucket, err := conn.StateBucket(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(ctxT(t), "tally.t1")
	if err != nil {
		t.Fatal(err)
	}
	if writes := ent.Revision(); writes > total/2 {
		t.Fatalf("%d state writes for %d records: no batching", writes, total)
	}
	t.Logf("%d records applied with %d state writes", total, ent.Revision())
}

// awaitTally waits for r's state to hold want records, then returns it; it
// fails the test when it holds more, or holds them out of order or twice.
func awaitTally(t *testing.T, c *actor.Client, r records.Ref, want int, within time.Duration) tally {
	t.Helper()
	var s tally
	actortest.Eventually(t, within, "every record applied", func() bool {
		doc, err := c.State(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return len(s.Seen) >= want
	})
	if len(s.Seen) != want {
		t.Fatalf("%d records applied, want %d", len(s.Seen), want)
	}
	for i := 1; i < len(s.Seen); i++ {
		if s.Seen[i] <= s.Seen[i-1] {
			t.Fatalf("applied out of order or twice: %d after %d", s.Seen[i], s.Seen[i-1])
		}
	}
	return s
}

// backlogTally is the tally kind in batches of 8 whose logic waits for gate
// to close (once every record is published: a backlog), then runs apply.
func backlogTally(gate <-chan struct{}, apply func(*actor.Context, tally) (tally, error)) actor.Kind[tally] {
	return actor.Kind[tally]{
		Name:     "tally",
		MaxBatch: 8,
		Logic: func(ctx *actor.Context, s tally) (tally, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return s, ctx.Err()
			}
			return apply(ctx, s)
		},
	}
}

var errTransient = transientError("a transient failure")

type transientError string

func (e transientError) Error() string { return string(e) }

// TestPipelinedBatchLosesItsWrite: batches of one effector are pipelined
// (the next batch's logic runs and its outputs go out before the batch
// before it is written). When the batch before loses its compare-and-set
// at that moment, both it and the batch built on it are taken again, on
// the document that won: every record is applied once, in order, and each
// output is stored once (the re-run's outputs carry the same ids).
func TestPipelinedBatchLosesItsWrite(t *testing.T) {
	t.Parallel()
	type seen struct {
		Seq   uint64 `json:"seq"`
		Count int    `json:"count"`
	}
	var logicMax atomic.Uint64  // the highest sequence logic has run on
	gate := make(chan struct{}) // closed once every record is published: a backlog
	kind := backlogTally(gate, func(ctx *actor.Context, s tally) (tally, error) {
		seq := ctx.Record().Seq
		logicMax.Store(max(logicMax.Load(), seq))
		s.Seen = append(s.Seen, seq)
		return s, ctx.Emit("seen", seen{Seq: seq, Count: len(s.Seen)})
	})
	_, conn := server(t)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	const total = 200
	bucket, err := conn.StateBucket(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	key := conn.Names().StateKey(r)

	// At the first batch that starts past sequence 40 and has the next
	// batch pipelined on it, once its outputs are stored, write its
	// document behind the node's back (the same value: only the revision
	// moves), so its compare-and-set is lost.
	type call struct {
		point    actor.CrashPoint
		seq      uint64
		logicMax uint64
	}
	var (
		mu       sync.Mutex
		calls    []call
		injected = -1 // index in calls of the conflict
	)
	startNode(t, conn, func(n *actor.Node) {
		n.SetCrash(func(point actor.CrashPoint, _ records.Ref, seq uint64) bool {
			mu.Lock()
			defer mu.Unlock()
			first := len(calls) == 0 || calls[len(calls)-1].point != point || calls[len(calls)-1].seq+1 != seq
			calls = append(calls, call{point, seq, logicMax.Load()})
			// Only a batch the next one was pipelined on: logic has run
			// past the most it can hold (MaxBatch 8). A batch the drain
			// finished on its own, with nothing more held at that moment (a
			// loaded machine), is passed over.
			if injected >= 0 || point != actor.AfterOutputs || seq <= 40 || !first || logicMax.Load() < seq+8 {
				return false
			}
			injected = len(calls) - 1
			ent, err := bucket.Get(ctxT(t), key)
			if err != nil {
				t.Error(err)
				return false
			}
			if _, err := bucket.Update(ctxT(t), key, ent.Value(), ent.Revision()); err != nil {
				t.Error(err)
			}
			return false
		})
	}, kind)
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, total)
	close(gate)

	s := awaitTally(t, c, r, total, 2*time.Minute)
	if gap := s.Seen[len(s.Seen)-1] - s.Seen[0]; gap != total-1 {
		t.Fatalf("records %d to %d applied, want %d consecutive ones", s.Seen[0], s.Seen[len(s.Seen)-1], total)
	}

	mu.Lock()
	if injected < 0 {
		mu.Unlock()
		t.Fatal("no batch past sequence 40 had the next one pipelined on it: nothing was injected")
	}
	// The batch whose write was lost: its records' calls at AfterOutputs,
	// consecutive from the injection. When it reached that point, the next
	// batch's logic had run already (pipelined).
	last := calls[injected].seq
	for i := injected + 1; i < len(calls) && calls[i].point == actor.AfterOutputs && calls[i].seq == last+1; i++ {
		last = calls[i].seq
	}
	atInjection := calls[injected].logicMax
	// After the lost write the same batch reached AfterOutputs again.
	again := false
	for _, c := range calls[injected+1:] {
		if c.point == actor.AfterOutputs && c.seq == calls[injected].seq {
			again = true
		}
	}
	mu.Unlock()
	if atInjection <= last {
		t.Errorf("when the batch %d..%d was written, logic had run up to %d only: the next batch was not pipelined", calls[injected].seq, last, atInjection)
	}
	if !again {
		t.Errorf("the batch from %d was not applied again after its write was lost", calls[injected].seq)
	}

	// Every output stored once, with the count of its own record.
	stream, err := conn.OutboxStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctxT(t), jetstream.OrderedConsumerConfig{FilterSubjects: []string{conn.Names().Outbox(r)}})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[uint64]int{}
	for len(counts) < total {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("after %d outputs: %v", len(counts), err)
		}
		rec, err := records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		var out seen
		if err := rec.Decode(&out); err != nil {
			t.Fatal(err)
		}
		if counts[out.Seq]++; counts[out.Seq] > 1 {
			t.Fatalf("the output of record %d stored twice", out.Seq)
		}
		if want := int(out.Seq - s.Seen[0] + 1); out.Count != want {
			t.Fatalf("the output of record %d counts %d, want %d", out.Seq, out.Count, want)
		}
	}
	info, err := stream.Info(ctxT(t), jetstream.WithSubjectFilter(conn.Names().Outbox(r)))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Subjects[conn.Names().Outbox(r)]; got != total {
		t.Fatalf("%d outputs stored, want %d", got, total)
	}
}

// TestPipelinedBatchOutputRefused: when the server refuses an output of a
// pipelined batch for good (above the outbox's MaxMsgSize), that batch's
// records, and those of the batch built on it, are taken again one at a
// time: the record that made the output goes to dead letters, its state
// change dropped, and every other record is applied once, in order, with
// its output stored once.
func TestPipelinedBatchOutputRefused(t *testing.T) {
	t.Parallel()
	var (
		logicMax  atomic.Uint64 // the highest sequence logic has run on
		bigSeq    atomic.Uint64
		bigTries  atomic.Int32
		secondMax atomic.Uint64 // logicMax when the big record ran the second time
	)
	gate := make(chan struct{}) // closed once every record is published: a backlog
	kind := backlogTally(gate, func(ctx *actor.Context, s tally) (tally, error) {
		seq := ctx.Record().Seq
		if ctx.Record().Type == "big" {
			if bigTries.Add(1) == 2 {
				secondMax.Store(logicMax.Load())
			}
			bigSeq.Store(seq)
		}
		logicMax.Store(max(logicMax.Load(), seq))
		s.Seen = append(s.Seen, seq)
		if ctx.Record().Type == "big" {
			return s, ctx.Emit("big", bytes.Repeat([]byte{1}, 64<<10))
		}
		return s, ctx.Emit("seen", seq)
	})
	_, conn := server(t)
	ctx := ctxT(t)
	stream, err := conn.OutboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxMsgSize = 32 << 10
	if _, err := conn.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	startNode(t, conn, nil, kind)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	if _, err := c.Create(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	const total = 100
	for i := range total {
		typ := "inc"
		if i == 44 {
			typ = "big"
		}
		rec, err := records.New(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, r, rec); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)

	dead, err := c.DeadLetters(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()
	dl, err := next()
	if err != nil {
		t.Fatal(err)
	}
	if dl.Reason != "output_too_large" || dl.Seq != bigSeq.Load() {
		t.Fatalf("dead letter of record %d for %q (%s), want record %d for output_too_large", dl.Seq, dl.Reason, dl.Error, bigSeq.Load())
	}
	if got := secondMax.Load(); got < bigSeq.Load()+8 {
		t.Errorf("when record %d ran again, logic had run up to %d only: the batch after its own was not pipelined", bigSeq.Load(), got)
	}
	s := awaitTally(t, c, r, total-1, 2*time.Minute)
	if slices.Contains(s.Seen, bigSeq.Load()) {
		t.Fatalf("record %d, sent to dead letters, is in the state", bigSeq.Load())
	}
	ids := outputs(t, conn, conn.Names().Outbox(r))
	if len(ids) != total-1 {
		t.Fatalf("%d outputs stored, want %d (one per applied record)", len(ids), total-1)
	}
}

// TestPipelinedBatchTerminated: an effector terminated while one batch
// waits to be written and the next is pipelined on it. The write finds the
// TERMINATED document and does not overwrite it; every record is then
// either in the state as terminated or in dead letters (terminated), none
// in both and none missing.
func TestPipelinedBatchTerminated(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{}) // closed once every record is published: a backlog
	kind := backlogTally(gate, func(ctx *actor.Context, s tally) (tally, error) {
		s.Seen = append(s.Seen, ctx.Record().Seq)
		return s, ctx.Emit("seen", ctx.Record().Seq)
	})
	_, conn := server(t)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	const total = 200
	bucket, err := conn.StateBucket(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	key := conn.Names().StateKey(r)
	var once sync.Once
	terminated := make(chan error, 1)
	startNode(t, conn, func(n *actor.Node) {
		n.SetCrash(func(point actor.CrashPoint, _ records.Ref, seq uint64) bool {
			if point != actor.AfterOutputs || seq <= 40 {
				return false
			}
			once.Do(func() {
				// Terminate from outside while this batch waits to be
				// written (the node's control handler may wait for the
				// record in hand: not from this goroutine).
				go func() {
					_, err := c.Terminate(context.Background(), r)
					terminated <- err
				}()
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					ent, err := bucket.Get(context.Background(), key)
					if err == nil && strings.Contains(string(ent.Value()), string(actor.StatusTerminated)) {
						return
					}
					time.Sleep(5 * time.Millisecond) // polling the document
				}
				t.Error("the effector was not terminated within 30s")
			})
			return false
		})
	}, kind)
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, total)
	close(gate)
	select {
	case err := <-terminated:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no batch reached its write past sequence 40: nothing was terminated")
	}

	dead, err := c.DeadLetters(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(dead)
	defer stop()
	doc, err := c.State(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != actor.StatusTerminated {
		t.Fatalf("status %s after the termination, want TERMINATED: a write overwrote it", doc.Status)
	}
	var s tally
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if len(s.Seen) == 0 || len(s.Seen) >= total {
		t.Fatalf("%d records in the terminated state, want some but not all", len(s.Seen))
	}
	where := map[uint64]string{}
	for _, seq := range s.Seen {
		where[seq] = "state"
	}
	for range total - len(s.Seen) {
		dl, err := next()
		if err != nil {
			t.Fatalf("%d records in the state, %d dead letters, want %d in all: %v", len(s.Seen), len(where)-len(s.Seen), total, err)
		}
		if dl.Reason != "terminated" {
			t.Fatalf("record %d dead-lettered for %q (%s), want terminated", dl.Seq, dl.Reason, dl.Error)
		}
		if w, ok := where[dl.Seq]; ok {
			t.Fatalf("record %d both in the %s and in dead letters", dl.Seq, w)
		}
		where[dl.Seq] = "dead letters"
	}
	if len(where) != total {
		t.Fatalf("%d records accounted for, want %d", len(where), total)
	}
}

// TestPipelinedBatchLostAcknowledgements: the outbox stops answering (its
// subjects moved away, and a plain subscriber swallows the outputs, as a
// stream leader that dies with publishes in flight leaves them unanswered)
// while batches are pipelined, then answers again. The publishes waiting
// for an answer give up and are made again: every record is applied once
// and its output stored once, instead of the batch waiting for good, and
// the outputs are stored in the order of their records (a batch's outputs
// are not sent before the batch before it has all its own stored: sent
// while that one's lost outputs still waited to be sent again, they were
// stored first).
func TestPipelinedBatchLostAcknowledgements(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{}) // closed once every record is published: a backlog
	kind := backlogTally(gate, func(ctx *actor.Context, s tally) (tally, error) {
		s.Seen = append(s.Seen, ctx.Record().Seq)
		return s, ctx.Emit("seen", ctx.Record().Seq)
	})
	_, conn := server(t)
	ctx := ctxT(t)
	startNode(t, conn, nil, kind)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	if _, err := c.Create(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	const total = 100
	publishIncs(t, conn, r, total)

	stream, err := conn.OutboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	moved := cfg
	moved.Subjects = []string{"elsewhere.>"}
	if _, err := conn.JetStream().UpdateStream(ctx, moved); err != nil {
		t.Fatal(err)
	}
	var swallowed atomic.Int64
	hole, err := conn.NATS().Subscribe(conn.Names().Outbox(r), func(*nats.Msg) { swallowed.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	close(gate)
	actortest.Eventually(t, 30*time.Second, "outputs sent into the void", func() bool { return swallowed.Load() >= 16 })
	time.Sleep(time.Second) // several batches' worth of waiting
	if err := hole.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.JetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	s := awaitTally(t, c, r, total, time.Minute)
	if gap := s.Seen[len(s.Seen)-1] - s.Seen[0]; gap != total-1 {
		t.Fatalf("records %d to %d applied, want %d consecutive ones", s.Seen[0], s.Seen[len(s.Seen)-1], total)
	}
	if ids := outputs(t, conn, conn.Names().Outbox(r)); len(ids) != total {
		t.Fatalf("%d outputs stored, want %d", len(ids), total)
	}
	// The outputs lost with the outbox were sent again before any of the
	// next batch: stored in the order of their records.
	seqs := outputSeqs(t, conn, conn.Names().Outbox(r))
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("output of record %d stored after the output of record %d: %v", seqs[i], seqs[i-1], seqs)
		}
	}
	t.Logf("%d outputs swallowed while the outbox did not answer", swallowed.Load())
}

// TestAnswerLostThenStopped: the answer to a batch's state write is lost
// and the effector's partition is read again at that moment (its node's
// connection dropped under the write, and the post-reconnect check found
// records outstanding), so the effector stops with its write stored but
// unanswered. It finds its write stored before it stops and counts the
// batch's records ok; their next reader finds them applied
// (already_applied): summed, ok counts each record applied once (the
// cluster torture run counted one record short before).
func TestAnswerLostThenStopped(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	kind := backlogTally(gate, func(ctx *actor.Context, s tally) (tally, error) {
		s.Seen = append(s.Seen, ctx.Record().Seq)
		return s, nil
	})
	_, conn := server(t)
	var lost atomic.Uint64
	n := startNode(t, conn, func(n *actor.Node) {
		n.SetAnswerLost(func(_ records.Ref, seq uint64) bool {
			return seq > 30 && lost.CompareAndSwap(0, seq)
		})
	}, kind)
	c := newClient(t, conn)
	r := records.Ref{Kind: "tally", ID: "t1"}
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	const total = 100
	publishIncs(t, conn, r, total)
	close(gate)
	awaitTally(t, c, r, total, time.Minute)
	if lost.Load() == 0 {
		t.Fatal("no state write's answer was lost: the test did not test")
	}
	count := func(outcome string) float64 {
		return metricSum(t, n.Registry, "ea_records_processed_total", "kind", "tally", "outcome", outcome)
	}
	actortest.Eventually(t, 10*time.Second, "every record counted", func() bool { return count("ok") >= total })
	if got := count("ok"); got != total {
		t.Fatalf(`ea_records_processed_total{outcome="ok"} = %v, want %d`, got, total)
	}
	if got := count("already_applied"); got == 0 {
		t.Fatal(`ea_records_processed_total{outcome="already_applied"} = 0: the records of the batch whose answer was lost were not read again`)
	}
	t.Logf("answer lost for the write up to record %d; %v records found applied by their next reader", lost.Load(), count("already_applied"))
}
