package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// fixture publishes 60 records: effectors w/0..w/2 get 10 mailbox records
// each and emit 10 outbox records each; processes p0..p2 by index mod 3;
// types "task" for even, "result" for odd. It returns the ids in publish
// order.
func fixture(t *testing.T, e *env) []rec {
	t.Helper()
	var rs []rec
	for i := range 60 {
		w := i % 3
		subject := fmt.Sprintf("ea.mbox.w.%d", w)
		if i%2 == 1 {
			subject = fmt.Sprintf("ea.out.w.%d", w)
		}
		typ := "task"
		if i%4 >= 2 {
			typ = "result"
		}
		rs = append(rs, rec{subject: subject, id: fmt.Sprintf("r%02d", i), typ: typ, process: fmt.Sprintf("p%d", (i/3)%3)})
	}
	publish(t, e.conn, rs...)
	e.indexed(t)
	return rs
}

func ids(rs []rec, keep func(rec) bool) []string {
	var out []string
	for _, r := range rs {
		if keep(r) {
			out = append(out, r.id)
		}
	}
	return out
}

func reversed(s []string) []string {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

func TestQuery(t *testing.T) {
	t.Parallel()
	queryTable(t, newEnv(t))
}

// TestQueryStreamGroups is TestQuery on a deployment with 3 stream groups:
// the indexer follows every group's mailbox and outbox stream, and every
// query, the whole log's included, merges them.
func TestQueryStreamGroups(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t, 3)
	n := e.conn.Names()
	groups := map[int]bool{}
	for w := range 3 {
		groups[n.GroupOf(records.Ref{Kind: "w", ID: strconv.Itoa(w)})] = true
	}
	if len(groups) < 2 {
		t.Fatalf("w/0..w/2 all in group(s) %v: the test proves nothing", groups)
	}
	queryTable(t, e)
	p, err := e.client.Query(context.Background(), store.Query{Effector: records.Ref{Kind: "w", ID: "1"}, Box: store.BoxOutbox, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Records[0]; r.Box != store.BoxOutbox || r.Stream != n.OutboxStreamFor(r.Effector) || r.Effector.String() != "w/1" {
		t.Fatalf("an outbox record with groups: box %s, stream %s, effector %s", r.Box, r.Stream, r.Effector)
	}
	for id, want := range map[string]string{"r00": n.MailboxStreamFor(records.Ref{Kind: "w", ID: "0"}), "r01": n.OutboxStreamFor(records.Ref{Kind: "w", ID: "1"})} {
		if r, err := e.client.Get(context.Background(), id); err != nil || r.Stream != want {
			t.Fatalf("get %s with groups: stream %s, %v; want %s", id, r.Stream, err, want)
		}
	}
}

func queryTable(t *testing.T, e *env) {
	rs := fixture(t, e)
	w1 := records.Ref{Kind: "w", ID: "1"}
	tests := []struct {
		name string
		q    store.Query
		keep func(rec) bool
	}{
		{"everything", store.Query{}, func(rec) bool { return true }},
		{"process", store.Query{Process: "p1"}, func(r rec) bool { return r.process == "p1" }},
		{"process and type", store.Query{Process: "p1", Type: "result"}, func(r rec) bool { return r.process == "p1" && r.typ == "result" }},
		{"process and effector", store.Query{Process: "p2", Effector: w1}, func(r rec) bool { return r.process == "p2" && r.subject[len(r.subject)-3:] == "w.1" }},
		{"effector both boxes", store.Query{Effector: w1}, func(r rec) bool { return r.subject[len(r.subject)-3:] == "w.1" }},
		{"effector mailbox", store.Query{Effector: w1, Box: store.BoxMailbox}, func(r rec) bool { return r.subject == "ea.mbox.w.1" }},
		{"effector outbox", store.Query{Effector: w1, Box: store.BoxOutbox}, func(r rec) bool { return r.subject == "ea.out.w.1" }},
		{"type", store.Query{Type: "task"}, func(r rec) bool { return r.typ == "task" }},
		{"outboxes of every effector", store.Query{Box: store.BoxOutbox}, func(r rec) bool { return r.subject[:6] == "ea.out" }},
		{"unknown process", store.Query{Process: "nope"}, func(rec) bool { return false }},
	}
	for _, tt := range tests {
		want := ids(rs, tt.keep)
		for _, limit := range []int{1, 4, 100} {
			t.Run(fmt.Sprintf("%s/limit %d", tt.name, limit), func(t *testing.T) {
				q := tt.q
				q.Limit = limit
				perEffector := e.conn.Names().Groups() > 1
				sameOrderIn(t, q, all(t, e.client, q), want, perEffector)
				q.Order = store.NewestFirst
				sameOrderIn(t, q, all(t, e.client, q), reversed(want), perEffector)
			})
		}
	}
}

func TestQueryRecordFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publish(t, e.conn, rec{subject: "ea.mbox.w.7", id: "one", typ: "task", process: "p"})
	e.indexed(t)
	p, err := e.client.Query(context.Background(), store.Query{Process: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 {
		t.Fatalf("%d records", len(p.Records))
	}
	r := p.Records[0]
	if r.Subject != "ea.mbox.w.7" || r.Box != store.BoxMailbox || r.Effector != (records.Ref{Kind: "w", ID: "7"}) ||
		r.Stream != "EA_MBOX" || r.Seq != 1 || r.Type != "task" || r.Stored.IsZero() || r.Invalid != "" {
		t.Fatalf("record %+v", r)
	}
	var body map[string]string
	if err := r.Decode(&body); err != nil || body["id"] != "one" {
		t.Fatalf("payload %v %v", body, err)
	}
}

// A cursor keeps its place while records arrive: oldest first it reads the
// new ones after the old; newest first it goes on back in time.
func TestCursorWhileRecordsArrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := fixture(t, e)
	ctx := context.Background()
	want := ids(rs, func(r rec) bool { return r.process == "p0" })
	for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
		q := store.Query{Process: "p0", Limit: 3, Order: order}
		p, err := e.client.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range p.Records {
			got = append(got, r.ID)
		}
		id := "new-" + string(order)
		publish(t, e.conn, rec{subject: "ea.mbox.w.0", id: id, typ: "task", process: "p0"})
		e.indexed(t)
		q.Cursor = p.Cursor
		got = append(got, all(t, e.client, q)...)
		exp := append(slices.Clone(want), id)
		if order == store.NewestFirst {
			exp = reversed(want)
		}
		if order == store.OldestFirst && want[len(want)-1] != exp[len(exp)-2] {
			t.Fatal("fixture")
		}
		if order == store.OldestFirst {
			exp = append(slices.Clone(want), "new-")
		}
		if order == store.OldestFirst {
			exp[len(exp)-1] = id
		}
		sameOrder(t, q, got, exp)
		want = append(want, id)
	}
	// Oldest first, at the end: the cursor is still set and reads what comes.
	p, err := e.client.Query(ctx, store.Query{Effector: records.Ref{Kind: "w", ID: "9"}})
	if err != nil || len(p.Records) != 0 || p.More || p.Cursor == "" {
		t.Fatalf("empty effector: %+v %v", p, err)
	}
	publish(t, e.conn, rec{subject: "ea.out.w.9", id: "later", typ: "x"})
	p, err = e.client.Query(ctx, store.Query{Effector: records.Ref{Kind: "w", ID: "9"}, Cursor: p.Cursor})
	if err != nil || len(p.Records) != 1 || p.Records[0].ID != "later" {
		t.Fatalf("tail: %+v %v", p, err)
	}
}

func TestQueryTimeRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publish(t, e.conn, rec{subject: "ea.mbox.w.1", id: "before", process: "p"}, rec{subject: "ea.out.w.1", id: "before-out", process: "p"})
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	publish(t, e.conn, rec{subject: "ea.mbox.w.1", id: "in", process: "p"}, rec{subject: "ea.out.w.1", id: "in-out", process: "p"})
	until := time.Now()
	time.Sleep(20 * time.Millisecond)
	publish(t, e.conn, rec{subject: "ea.mbox.w.1", id: "after", process: "p"})
	e.indexed(t)
	for _, q := range []store.Query{
		{Since: since, Until: until},
		{Since: since, Until: until, Process: "p"},
		{Since: since, Until: until, Effector: records.Ref{Kind: "w", ID: "1"}},
	} {
		// Process queries come in indexing order, which interleaves the
		// mailbox and outbox streams as the indexer saw them.
		ordered := func(got []string) []string {
			if q.Process != "" {
				slices.Sort(got)
			}
			return got
		}
		if got := ordered(all(t, e.client, q)); !slices.Equal(got, []string{"in", "in-out"}) {
			t.Errorf("%+v: got %v", q, got)
		}
		q.Order = store.NewestFirst
		want := []string{"in-out", "in"}
		if q.Process != "" {
			want = []string{"in", "in-out"}
		}
		if got := ordered(all(t, e.client, q)); !slices.Equal(got, want) {
			t.Errorf("%+v: got %v", q, got)
		}
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	fixture(t, e)
	// A record without Nats-Msg-Id gets the id the runtime derives.
	m := records.Record{Type: "raw"}.Msg("ea.out.w.5")
	m.Header.Del(records.HeaderID)
	ack, err := e.conn.JetStream().PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	e.indexed(t)
	r, err := e.client.Get(ctx, "r17")
	if err != nil || r.ID != "r17" || r.Subject != "ea.out.w.2" {
		t.Fatalf("get r17: %+v %v", r, err)
	}
	derived := fmt.Sprintf("s%d", ack.Sequence)
	r, err = e.client.Get(ctx, derived)
	if err != nil || r.Type != "raw" || r.ID != derived {
		t.Fatalf("get %s: %+v %v", derived, r, err)
	}
	_, err = e.client.Get(ctx, "missing")
	isErr(t, err, store.ErrNotFound)
	_, err = e.client.Get(ctx, "has space")
	isErr(t, err, store.ErrInvalid)
}

func TestCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := fixture(t, e)
	ctx := context.Background()
	w1 := records.Ref{Kind: "w", ID: "1"}
	for _, tt := range []struct {
		q    store.Query
		keep func(rec) bool
	}{
		{store.Query{}, func(rec) bool { return true }},
		{store.Query{Process: "p1"}, func(r rec) bool { return r.process == "p1" }},
		{store.Query{Type: "result"}, func(r rec) bool { return r.typ == "result" }},
		{store.Query{Effector: w1}, func(r rec) bool { return r.subject[len(r.subject)-3:] == "w.1" }},
		{store.Query{Effector: w1, Box: store.BoxOutbox}, func(r rec) bool { return r.subject == "ea.out.w.1" }},
		{store.Query{Box: store.BoxMailbox}, func(r rec) bool { return r.subject[:7] == "ea.mbox" }},
		{store.Query{Process: "p1", Type: "task"}, func(r rec) bool { return r.process == "p1" && r.typ == "task" }},
		{store.Query{Process: "nope"}, func(rec) bool { return false }},
	} {
		n, err := e.client.Count(ctx, tt.q)
		if want := len(ids(rs, tt.keep)); err != nil || n != uint64(want) {
			t.Errorf("count %+v = %d, %v; want %d", tt.q, n, err, want)
		}
	}
}

func TestQueryValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixture(t, e)
	ctx := context.Background()
	p, err := e.client.Query(ctx, store.Query{Process: "p1", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		q    store.Query
		want []error
	}{
		{"page too large", store.Query{Limit: store.MaxLimit + 1}, []error{store.ErrInvalid, store.ErrPageTooLarge}},
		{"negative limit", store.Query{Limit: -1}, []error{store.ErrInvalid}},
		{"garbage cursor", store.Query{Cursor: "!!!"}, []error{store.ErrInvalid, store.ErrBadCursor}},
		{"cursor of another query", store.Query{Process: "p2", Cursor: p.Cursor}, []error{store.ErrInvalid, store.ErrBadCursor}},
		{"cursor of another order", store.Query{Process: "p1", Order: store.NewestFirst, Cursor: p.Cursor}, []error{store.ErrBadCursor}},
		{"bad box", store.Query{Box: "inbox"}, []error{store.ErrInvalid}},
		{"bad order", store.Query{Order: "up"}, []error{store.ErrInvalid}},
		{"bad effector", store.Query{Effector: records.Ref{Kind: "a.b", ID: "x"}}, []error{store.ErrInvalid}},
		{"bad process", store.Query{Process: "a b"}, []error{store.ErrInvalid}},
		{"bad type", store.Query{Type: "a b"}, []error{store.ErrInvalid}},
		{"until before since", store.Query{Since: time.Now(), Until: time.Now().Add(-time.Hour)}, []error{store.ErrInvalid}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.client.Query(ctx, tt.q)
			isErr(t, err, tt.want...)
		})
	}
	// The same query with another page size continues fine.
	if _, err := e.client.Query(ctx, store.Query{Process: "p1", Limit: 7, Cursor: p.Cursor}); err != nil {
		t.Fatal(err)
	}
}

// sameOrder checks got against want: exactly for queries read from the log
// (merged by stored time), and for index queries (process, type) as the
// same records with each stream's records in stream order: the mailbox and
// outbox streams are indexed side by side, so the index interleaves them in
// the order it saw them.
func sameOrder(t *testing.T, q store.Query, got, want []string) {
	t.Helper()
	sameOrderIn(t, q, got, want, false)
}

// sameOrderIn is sameOrder; with perEffector, index-ordered results (process,
// type) need keep stream order only per effector and box: with stream
// groups the effectors' records are in several streams, which the indexer
// follows side by side, so the index interleaves them in any order.
func sameOrderIn(t *testing.T, q store.Query, got, want []string, perEffector bool) {
	t.Helper()
	if q.Process == "" && q.Type == "" {
		if !slices.Equal(got, want) {
			t.Errorf("%+v:\n got %v\nwant %v", q, got, want)
		}
		return
	}
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("%+v: records differ:\n got %v\nwant %v", q, got, want)
		return
	}
	// In the fixtures odd-numbered ids are outbox records, others mailbox;
	// record n is effector w/<n mod 3>'s.
	key := func(id string) string {
		n, err := strconv.Atoi(id[len(id)-2:])
		if err != nil {
			return "mailbox"
		}
		k := map[bool]string{false: "mailbox", true: "outbox"}[n%2 == 1]
		if perEffector {
			k += fmt.Sprint(" of w/", n%3)
		}
		return k
	}
	groups := func(ids []string) map[string][]string {
		m := map[string][]string{}
		for _, id := range ids {
			m[key(id)] = append(m[key(id)], id)
		}
		return m
	}
	g, w := groups(got), groups(want)
	for k := range w {
		if !slices.Equal(g[k], w[k]) {
			t.Errorf("%+v: stream order (%s):\n got %v\nwant %v", q, k, got, want)
		}
	}
}

// Processes and types that are not subject tokens are indexed under an
// encoded token, and found.
func TestQueryOddNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publish(t, e.conn,
		rec{subject: "ea.mbox.w.1", id: "a", typ: "x.y/z", process: "order.7>*"},
		rec{subject: "ea.out.w.1", id: "b", typ: "x.y", process: "order.7"},
		rec{subject: "ea.out.w.1", id: "id.with.dots", typ: "x.y/z", process: "~order"},
	)
	e.indexed(t)
	for _, tt := range []struct {
		q    store.Query
		want []string
	}{
		{store.Query{Process: "order.7>*"}, []string{"a"}},
		{store.Query{Process: "order.7"}, []string{"b"}},
		{store.Query{Process: "~order"}, []string{"id.with.dots"}},
		{store.Query{Type: "x.y/z"}, []string{"a", "id.with.dots"}},
	} {
		got := all(t, e.client, tt.q)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%+v: got %v want %v", tt.q, got, tt.want)
		}
	}
	r, err := e.client.Get(context.Background(), "id.with.dots")
	if err != nil || r.Process != "~order" {
		t.Fatalf("get: %+v %v", r, err)
	}
}

// A filter that matches rarely gives short pages with More set, and the
// cursor finds every match, in both orders.
func TestQueryScanBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	js := e.conn.JetStream()
	rare := map[int]bool{10: true, 24_990: true}
	for i := range 25_000 {
		typ := "noise"
		if rare[i] {
			typ = "rare"
		}
		x := records.Record{ID: fmt.Sprintf("n%05d", i), Type: typ}
		if _, err := js.PublishMsgAsync(x.Msg("ea.mbox.w.1"), jetstream.WithStallWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publish")
	}
	for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
		q := store.Query{Effector: records.Ref{Kind: "w", ID: "1"}, Type: "rare", Order: order, Limit: 10}
		var got []string
		short := 0
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("too many pages")
			}
			p, err := e.client.Query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Records) < q.Limit && p.More {
				short++
			}
			for _, r := range p.Records {
				got = append(got, r.ID)
			}
			if !p.More {
				break
			}
			q.Cursor = p.Cursor
		}
		want := []string{"n00010", "n24990"}
		if order == store.NewestFirst {
			want = reversed(want)
		}
		if !slices.Equal(got, want) || short == 0 {
			t.Errorf("%q: got %v with %d short pages; want %v and a short page", order, got, short, want)
		}
	}
}
