package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
)

// An index written by a server before entries were batched (format 1: one
// JSON entry per message, written by the same durable consumer) is read as
// it is after the upgrade: the new server goes on from the old one's
// consumer, queries and counts see old and new entries together in order,
// Get finds both, and a cursor the old server issued continues.
func TestUpgradeFromFormat1(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := context.Background()
	c, err := NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	js := conn.JetStream()
	pub := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			r, err := records.NewJSON("legacy.t", map[string]int{"i": i})
			if err != nil {
				t.Fatal(err)
			}
			r.ID, r.Process = "L"+strconv.Itoa(i), "legacy"
			if _, err := js.PublishMsg(ctx, r.Msg("ea.mbox.w.1")); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(0, 5)

	// The old server: its consumer takes the five records and writes one
	// JSON entry per record and index, with its message ids, then acks.
	mbox := c.n.MailboxStream()
	cons, err := js.CreateOrUpdateConsumer(ctx, mbox, jetstream.ConsumerConfig{
		Durable: IndexerName, Description: "record store indexer", DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 10_000, HeadersOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		h := m.Headers()
		old := struct {
			Stream  string `json:"st"`
			Seq     uint64 `json:"sq"`
			Subject string `json:"sj"`
			ID      string `json:"id"`
			Type    string `json:"ty"`
			Process string `json:"pr,omitempty"`
			Time    int64  `json:"ts"`
		}{meta.Stream, meta.Sequence.Stream, m.Subject(), h.Get(records.HeaderID), h.Get(records.HeaderType), h.Get(records.HeaderProcess), meta.Timestamp.UnixNano()}
		body, _ := json.Marshal(old)
		base := fmt.Sprintf("%s.%d.", old.Stream, old.Seq)
		_, proc := c.n.processIndex(old.Process)
		for subject, kind := range map[string]string{c.n.idIndex(old.ID): "i", c.n.typeIndex(old.Type): "t", proc: "p"} {
			msg := nats.NewMsg(subject)
			msg.Header.Set("Nats-Msg-Id", base+kind)
			msg.Data = body
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("the old indexer took %d records, want 5", n)
	}

	// A cursor the old server issued: format 1, positions are index
	// message sequences; this one continues after the second entry.
	pstream, psubject := c.n.processIndex("legacy")
	st, err := js.Stream(ctx, pstream)
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.GetMsg(ctx, 2)
	if err != nil || second.Subject != psubject {
		t.Fatalf("second process entry: %v %v", second, err)
	}
	q := Query{Process: "legacy"}
	v1Oldest := encodeCursorV(1, q.fingerprint(), []uint64{2})
	qn := Query{Process: "legacy", Order: NewestFirst}
	v1Newest := encodeCursorV(1, qn.fingerprint(), []uint64{4}) // below the fourth entry

	// The new server goes on where the old one stopped.
	sctx, cancel := context.WithCancel(ctx)
	s, err := NewServer(sctx, srv.Connect(t), ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("store server: %v", err)
		}
	})
	pub(5, 9)
	want := []string{"L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8"}
	ids := func(q Query) []string {
		t.Helper()
		var out []string
		for pages := 0; pages < 100; pages++ {
			p, err := c.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Records {
				out = append(out, r.ID)
			}
			if !p.More {
				return out
			}
			q.Cursor = p.Cursor
		}
		t.Fatal("more than 100 pages")
		return nil
	}
	deadline := time.Now().Add(time.Minute)
	for got := ids(Query{Process: "legacy"}); !slices.Equal(got, want); got = ids(Query{Process: "legacy"}) {
		if time.Now().After(deadline) {
			t.Fatalf("process legacy: %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Pages of 2 cross from old entries to new ones, in both orders.
	if got := ids(Query{Process: "legacy", Limit: 2}); !slices.Equal(got, want) {
		t.Errorf("oldest first in pages of 2: %v", got)
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := ids(Query{Process: "legacy", Limit: 2, Order: NewestFirst}); !slices.Equal(got, rev) {
		t.Errorf("newest first in pages of 2: %v", got)
	}
	if got := ids(Query{Type: "legacy.t", Limit: 3}); !slices.Equal(got, want) {
		t.Errorf("by type: %v", got)
	}
	// The old server's cursors continue.
	if got := ids(Query{Process: "legacy", Cursor: v1Oldest, Limit: 3}); !slices.Equal(got, want[2:]) {
		t.Errorf("old cursor, oldest first: %v, want %v", got, want[2:])
	}
	if got := ids(Query{Process: "legacy", Order: NewestFirst, Cursor: v1Newest, Limit: 2}); !slices.Equal(got, []string{"L2", "L1", "L0"}) {
		t.Errorf("old cursor, newest first: %v, want L2 L1 L0", got)
	}
	for _, id := range []string{"L1", "L7"} {
		r, err := c.Get(ctx, id)
		if err != nil || r.ID != id || r.Process != "legacy" {
			t.Errorf("get %s: %+v %v", id, r, err)
		}
	}
	for _, q := range []Query{{Process: "legacy"}, {Type: "legacy.t"}, {Process: "legacy", Type: "legacy.t"}} {
		if got, err := c.Count(ctx, q); err != nil || got != 9 {
			t.Errorf("count %+v: %d, %v; want 9", q, got, err)
		}
	}
}

// Against a server without fast batch publishing (before nats-server 2.14)
// the indexer writes the id index with a publish acknowledged per message:
// every record is found by its id, once.
func TestIndexWithoutFastBatch(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := NewServer(ctx, srv.Connect(t), ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ix.batched {
		t.Fatal("this server takes fast batches: the setting did not reach the indexer")
	}
	s.ix.batched = false
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("store server: %v", err)
		}
	})
	conn := srv.Connect(t)
	js := conn.JetStream()
	for i := range 300 {
		r, err := records.NewJSON("t", i)
		if err != nil {
			t.Fatal(err)
		}
		r.ID = "n" + strconv.Itoa(i)
		if _, err := js.PublishMsg(context.Background(), r.Msg("ea.out.w."+strconv.Itoa(i%5))); err != nil {
			t.Fatal(err)
		}
	}
	c := s.Client()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := c.Count(context.Background(), Query{Type: "t"})
		if err == nil && n == 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("count by type: %d, %v; want 300", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, i := range []int{0, 1, 150, 299} {
		id := "n" + strconv.Itoa(i)
		if r, err := c.Get(context.Background(), id); err != nil || r.ID != id {
			t.Errorf("get %s: %v", id, err)
		}
	}
	// One id entry per record: the id index holds 300 entries.
	if n, err := c.countIndex(context.Background(), source{stream: c.n.IndexStream(indexID), filter: c.n.indexFilter(indexID), index: true}); err != nil || n != 300 {
		t.Errorf("id index: %d entries, %v; want 300", n, err)
	}
}
