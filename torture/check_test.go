//go:build unix

package torture

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// errorLimit caps the errors reported per check, so that one broken run
// names the first cases and counts the rest instead of flooding the log.
const errorLimit = 20

// findings collects the failures of one check.
type findings struct {
	t     testing.TB
	what  string
	count int
}

func (f *findings) errorf(format string, args ...any) {
	f.t.Helper()
	f.count++
	if f.count <= errorLimit {
		f.t.Errorf(f.what+": "+format, args...)
	}
}

func (f *findings) done() {
	f.t.Helper()
	if f.count > errorLimit {
		f.t.Errorf("%s: %d more failures like these", f.what, f.count-errorLimit)
	}
}

// storedIn is one mailbox record as the stream holds it.
type storedIn struct {
	seq uint64
	in  input
}

// logSummary is what the checker read.
type logSummary struct {
	inputs, bad, outputs, dead int
	reasons                    map[string]int
}

// checkLog reads the whole record log of the counters — the mailbox stream
// EA_MBOX, the outbox stream EA_OUT, the dead-letter stream EA_DEAD — and
// their state documents in ea_state, directly with jetstream, and checks
// against what the publisher sent that:
//   - every input was stored exactly once (the publisher's side);
//   - every good input was applied exactly once and in order: it has exactly
//     one output, whose id is <input id>:0.<tag>, whose count is the sum of
//     the good increments of that counter up to it in stream order (the
//     state it was computed on plus its own), and the outputs of a counter
//     appear in the order of their inputs;
//   - every bad input, and nothing else, has exactly one dead letter naming
//     its mailbox sequence;
//   - every state document counts the sum of its good increments, its seq is
//     its last mailbox record's and its status is IDLE.
func checkLog(t testing.TB, ctx context.Context, js jetstream.JetStream, pub *publisher, lay layout) logSummary {
	t.Helper()
	sum := logSummary{reasons: map[string]int{}}
	sent := map[string]input{} // input id -> input
	counterOf := map[string]string{}
	for c, ins := range pub.inputs {
		for _, in := range ins {
			sent[in.id] = in
			counterOf[in.id] = c
		}
	}

	// The mailboxes, in stream order.
	f := &findings{t: t, what: "mailbox"}
	mbox := map[string][]storedIn{}  // counter -> its records in stream order
	seqOf := map[string]uint64{}     // input id -> mailbox sequence (of its group's stream)
	bySeq := map[counterSeq]string{} // counter and mailbox sequence -> input id
	lay.read(t, ctx, js, lay.mailboxes, "ea.mbox.*.counter.*", func(m jetstream.Msg, seq uint64) {
		c := token(m.Subject(), 4)
		id := m.Headers().Get("Nats-Msg-Id")
		in, ok := sent[id]
		switch {
		case !ok:
			f.errorf("seq %d on %s: record id %q was never published", seq, m.Subject(), id)
			return
		case counterOf[id] != c:
			f.errorf("seq %d: record %s was published to counter/%s, stored for counter/%s", seq, id, counterOf[id], c)
			return
		case seqOf[id] != 0:
			f.errorf("counter/%s: record %s stored twice, at seq %d and %d", c, id, seqOf[id], seq)
			return
		}
		seqOf[id], bySeq[counterSeq{c, seq}] = seq, id
		mbox[c] = append(mbox[c], storedIn{seq: seq, in: in})
		sum.inputs++
		if in.bad != "" {
			sum.bad++
		}
	})
	for id := range sent {
		if seqOf[id] == 0 {
			f.errorf("counter/%s: record %s acknowledged to the publisher but not in the mailbox stream", counterOf[id], id)
		}
	}
	f.done()

	// What each good input's output must say: the count after it.
	wantCount := map[string]int64{} // input id -> count
	total := map[string]int64{}     // counter -> final count
	lastSeq := map[string]uint64{}  // counter -> its last mailbox sequence
	for c, recs := range mbox {
		var n int64
		for _, r := range recs {
			if r.in.bad == "" {
				n += r.in.by
				wantCount[r.in.id] = n
			}
			lastSeq[c] = r.seq
		}
		total[c] = n
	}

	// The outboxes.
	f = &findings{t: t, what: "outbox"}
	outOf := map[string]string{}  // input id -> output id
	lastIn := map[string]uint64{} // counter -> mailbox seq of the cause of its last output
	outIDs := map[string]uint64{} // output id -> its seq in EA_OUT
	tag := regexp.MustCompile(`^(.+):0\.[0-9a-f]{20}$`)
	lay.read(t, ctx, js, lay.outboxes, lay.outFilter, func(m jetstream.Msg, seq uint64) {
		sum.outputs++
		c := token(m.Subject(), lay.outToken)
		id, cause := m.Headers().Get("Nats-Msg-Id"), m.Headers().Get("EA-Cause")
		if first, twice := outIDs[id]; twice {
			f.errorf("counter/%s: output id %s at EA_OUT seq %d and %d", c, id, first, seq)
			return
		}
		outIDs[id] = seq
		if mt := tag.FindStringSubmatch(id); mt == nil || mt[1] != cause {
			f.errorf("counter/%s: output %s (EA_OUT seq %d) has cause %q: want id <cause>:0.<tag>", c, id, seq, cause)
			return
		}
		in, ok := sent[cause]
		switch {
		case !ok || counterOf[cause] != c:
			f.errorf("counter/%s: output %s (EA_OUT seq %d) caused by %q, not an input of counter/%s", c, id, seq, cause, c)
			return
		case in.bad != "":
			f.errorf("counter/%s: output %s (EA_OUT seq %d) caused by bad input %s (mailbox seq %d, %s), which must be dead-lettered",
				c, id, seq, cause, seqOf[cause], in.bad)
			return
		case outOf[cause] != "":
			f.errorf("counter/%s: input %s (mailbox seq %d) applied twice: outputs %s and %s", c, cause, seqOf[cause], outOf[cause], id)
			return
		}
		outOf[cause] = id
		if s := seqOf[cause]; s < lastIn[c] {
			f.errorf("counter/%s: output %s for mailbox seq %d comes after the output for seq %d: applied out of order", c, id, s, lastIn[c])
		} else {
			lastIn[c] = s
		}
		var out struct {
			Count int64 `msgpack:"count"`
		}
		if err := msgpack.Unmarshal(m.Data(), &out); err != nil {
			f.errorf("counter/%s: output %s: decode: %v", c, id, err)
			return
		}
		if out.Count != wantCount[cause] {
			f.errorf("counter/%s: output %s for mailbox seq %d says count %d, want %d (the count after the good increments up to it): computed on other state",
				c, id, seqOf[cause], out.Count, wantCount[cause])
		}
	})
	for c, recs := range mbox {
		for _, r := range recs {
			if r.in.bad == "" && outOf[r.in.id] == "" {
				f.errorf("counter/%s: input %s (mailbox seq %d) has no output: never applied", c, r.in.id, r.seq)
			}
		}
	}
	f.done()

	// Dead letters: exactly the bad inputs, once each.
	f = &findings{t: t, what: "dead letters"}
	deadFor := map[counterSeq]bool{}
	readStream(t, ctx, js, "EA_DEAD", "ea.dead.>", func(m jetstream.Msg, seq uint64) {
		sum.dead++
		h := m.Headers()
		reason := h.Get("EA-Dead-Reason")
		sum.reasons[reason]++
		mseq, err := strconv.ParseUint(h.Get("EA-Seq"), 10, 64)
		key := counterSeq{token(m.Subject(), 3), mseq}
		id := bySeq[key]
		switch {
		case err != nil || id == "":
			f.errorf("dead letter at EA_DEAD seq %d on %s (reason %s: %s) names mailbox seq %q, not one of our records",
				seq, m.Subject(), reason, h.Get("EA-Error"), h.Get("EA-Seq"))
		case sent[id].bad == "":
			f.errorf("counter/%s: good input %s (mailbox seq %d) dead-lettered: reason %s: %s", counterOf[id], id, mseq, reason, h.Get("EA-Error"))
		case deadFor[key]:
			f.errorf("counter/%s: bad input %s (mailbox seq %d) dead-lettered twice", counterOf[id], id, mseq)
		}
		deadFor[key] = true
	})
	for c, recs := range mbox {
		for _, r := range recs {
			if r.in.bad != "" && !deadFor[counterSeq{c, r.seq}] {
				f.errorf("counter/%s: bad input %s (mailbox seq %d, %s) has no dead letter", c, r.in.id, r.seq, r.in.bad)
			}
		}
	}
	f.done()

	// State documents.
	f = &findings{t: t, what: "state"}
	kvs := lay.stateBuckets(t, ctx, js)
	for _, c := range pub.counters {
		d, err := readStateAny(ctx, kvs, "counter."+c)
		if err != nil {
			f.errorf("counter/%s: %v", c, err)
			continue
		}
		if d.Count() != total[c] || d.Seq != lastSeq[c] || d.Status != "IDLE" {
			f.errorf("counter/%s: count %d, seq %d, status %s: want count %d, seq %d (its last mailbox record), IDLE",
				c, d.Count(), d.Seq, d.Status, total[c], lastSeq[c])
		}
	}
	f.done()
	return sum
}

// counterSeq names a mailbox record by its counter and its sequence in the
// counter's group's mailbox stream (each group's stream numbers its own).
type counterSeq struct {
	counter string
	seq     uint64
}

// layout is where the deployment keeps the counters' records: one mailbox
// stream, outbox stream and state bucket, or one of each per stream group.
type layout struct {
	mailboxes, outboxes, buckets []string
	outFilter                    string // the counters' outboxes
	outToken                     int    // the token of an outbox subject naming the counter's id
}

// oneStream is the default layout (no --stream-groups).
var oneStream = layout{mailboxes: []string{"EA_MBOX"}, outboxes: []string{"EA_OUT"}, buckets: []string{"ea_state"},
	outFilter: "ea.out.counter.*", outToken: 3}

// layoutOf is the layout of names (prefix ea).
func layoutOf(names bus.Names) layout {
	if names.Groups() == 1 {
		return oneStream
	}
	return layout{mailboxes: names.MailboxStreams(), outboxes: names.OutboxStreams(), buckets: names.StateBuckets(),
		outFilter: "ea.out.*.counter.*", outToken: 4}
}

// read reads every stream of streams as readStream does, one after the
// other.
func (l layout) read(t testing.TB, ctx context.Context, js jetstream.JetStream, streams []string, filter string, fn func(jetstream.Msg, uint64)) {
	t.Helper()
	for _, s := range streams {
		readStream(t, ctx, js, s, filter, fn)
	}
}

// stateBuckets opens the layout's state buckets.
func (l layout) stateBuckets(t testing.TB, ctx context.Context, js jetstream.JetStream) []jetstream.KeyValue {
	t.Helper()
	var kvs []jetstream.KeyValue
	for _, b := range l.buckets {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			t.Fatalf("state bucket %s: %v", b, err)
		}
		kvs = append(kvs, kv)
	}
	return kvs
}

// readStateAny reads key's state document from whichever bucket holds it.
func readStateAny(ctx context.Context, kvs []jetstream.KeyValue, key string) (proctest.StateDoc, error) {
	var err error
	for _, kv := range kvs {
		var d proctest.StateDoc
		if d, err = proctest.ReadState(ctx, kv, key); err == nil {
			return d, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return d, err
		}
	}
	return proctest.StateDoc{}, err
}

// token is the i-th dot-separated token of subject, "" if none.
func token(subject string, i int) string {
	toks := strings.Split(subject, ".")
	if i >= len(toks) {
		return ""
	}
	return toks[i]
}

// readStream calls fn for every message of stream on filter, in stream
// order, with its stream sequence. A read that fails (a leader moving: the
// nodes spread leaders again after a restart) goes on from the last
// sequence read, for up to a minute.
func readStream(t testing.TB, ctx context.Context, js jetstream.JetStream, stream, filter string, fn func(jetstream.Msg, uint64)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last uint64 // the last sequence read
	read, want := 0, -1
	for {
		err := readFrom(ctx, js, stream, filter, &last, &read, &want, fn)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %s: %v", stream, err)
		}
		t.Logf("read %s: %v; going on from seq %d", stream, err, last+1)
		time.Sleep(250 * time.Millisecond)
	}
}

// readFrom is one try of readStream: it counts the messages on filter
// (once), and reads from after *last until *read reaches it.
func readFrom(ctx context.Context, js jetstream.JetStream, stream, filter string, last *uint64, read, want *int, fn func(jetstream.Msg, uint64)) error {
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, stream)
	if err != nil {
		return err
	}
	if *want < 0 {
		info, err := s.Info(ictx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return err
		}
		*want = 0
		for _, n := range info.State.Subjects {
			*want += int(n)
		}
	}
	if *read >= *want {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	if *last > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = *last + 1
	}
	cons, err := s.OrderedConsumer(ictx, cfg)
	if err != nil {
		return err
	}
	for *read < *want {
		batch, err := cons.Fetch(min(1000, *want-*read), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		got := 0
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			fn(m, meta.Sequence.Stream)
			*last = meta.Sequence.Stream
			*read++
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got == 0 {
			return fmt.Errorf("%d of %d records on %s, then nothing more", *read, *want, filter)
		}
	}
	return nil
}
