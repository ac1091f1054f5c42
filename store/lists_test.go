package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// listAll follows a list's cursor to its end, returning the items and the
// number of pages, checking each page's size.
func listAll[T any](t *testing.T, limit int, page func(cursor string) ([]T, string, bool, error)) ([]T, int) {
	t.Helper()
	var all []T
	cursor := ""
	for pages := 1; pages <= 100; pages++ {
		items, next, more, err := page(cursor)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(items) > limit {
			t.Fatalf("page %d: %d items, limit %d", pages, len(items), limit)
		}
		all = append(all, items...)
		if !more {
			return all, pages
		}
		cursor = next
	}
	t.Fatal("more than 100 pages")
	return nil, 0
}

// TestListOrchestrations: orchestrations with several revisions each are
// listed once, by their latest revision, newest first and oldest first,
// over several pages; status filters see the latest status only.
func TestListOrchestrations(t *testing.T) {
	t.Parallel()
	e, c := orchEnv(t)
	ctx := context.Background()
	start := time.Now().Add(-time.Second)
	ids := make([]string, 5)
	for i := range ids {
		id, err := c.Start(ctx, "demo", map[string]any{"text": fmt.Sprintf("list %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	for _, id := range ids {
		waitOrch(t, c, id, supervisor.StatusWaiting)
	}
	for _, id := range ids[:2] {
		if err := c.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitOrch(t, c, id, supervisor.StatusCancelled)
	}
	list := func(q store.OrchListQuery) ([]store.Orchestration, int) {
		return listAll(t, q.Limit, func(cursor string) ([]store.Orchestration, string, bool, error) {
			q.Cursor = cursor
			p, err := e.client.ListOrchestrations(ctx, q)
			return p.Orchestrations, p.Cursor, p.More, err
		})
	}
	idsOf := func(os []store.Orchestration) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.ID)
		}
		return out
	}
	for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
		got, pages := list(store.OrchListQuery{Order: order, Limit: 2})
		// Three pages, the last not empty: the stale revisions (each
		// orchestration has several) must not end a page short of the
		// stream's start with more set.
		if gotIDs := idsOf(got); pages != 3 || len(got) != 5 || !sameIDs(gotIDs, ids) {
			t.Fatalf("order %q: %v in %d pages, want each of %v once, over 3 pages", order, gotIDs, pages, ids)
		}
		revs := make([]uint64, len(got))
		for i, o := range got {
			revs[i] = o.Revision
		}
		want := slices.Clone(revs)
		slices.Sort(want)
		if order == store.NewestFirst {
			slices.Reverse(want)
		}
		if !slices.Equal(revs, want) {
			t.Fatalf("order %q: revisions %v, want %v", order, revs, want)
		}
	}
	for _, c := range []struct {
		q    store.OrchListQuery
		want []string
	}{
		{store.OrchListQuery{Status: "WAITING", Order: store.NewestFirst}, ids[2:]},
		{store.OrchListQuery{Status: "CANCELLED"}, ids[:2]},
		{store.OrchListQuery{Status: "RUNNING", Order: store.NewestFirst}, nil},
		{store.OrchListQuery{Search: ids[3][len(ids[3])-8:]}, ids[3:4]},
		{store.OrchListQuery{Name: "demo", Since: start, Until: time.Now().Add(time.Minute), Order: store.NewestFirst}, ids},
		{store.OrchListQuery{Since: time.Now().Add(time.Hour)}, nil},
	} {
		c.q.Limit = 2
		if got, _ := list(c.q); !sameIDs(idsOf(got), c.want) {
			t.Fatalf("%+v: %v, want %v", c.q, idsOf(got), c.want)
		}
	}
	p, err := e.client.ListOrchestrations(ctx, store.OrchListQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []store.OrchListQuery{
		{Cursor: p.Cursor, Order: store.NewestFirst}, {Cursor: p.Cursor, Status: "WAITING"}, {Cursor: "nope"},
		{Limit: store.MaxLimit + 1}, {Status: "SLEEPING"}, {Search: string(make([]byte, store.MaxSearch+1))},
		{Since: time.Now(), Until: time.Now().Add(-time.Hour)},
	} {
		if _, err := e.client.ListOrchestrations(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) && len(slices.Compact(slices.Clone(a))) == len(a)
}

// TestDeadLetters lists dead letters written to the dead-letter stream as
// the runtime writes them, with a discarded one among them: both orders
// over several pages, each once; filters by kind, effector, owner, reason,
// text and time.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	n := e.conn.Names()
	js := e.conn.JetStream()
	var seqs []uint64
	for i := range 12 {
		ref := records.Ref{Kind: "counter", ID: fmt.Sprintf("c%d", i%3)}
		if i%4 == 3 {
			ref.Kind = "other"
		}
		m := nats.NewMsg(n.Dead(ref))
		m.Header.Set(records.HeaderID, records.DeadID(fmt.Sprintf("rec-%02d", i)))
		m.Header.Set(records.HeaderType, "explode")
		m.Header.Set(records.HeaderOwner, []string{"alice", "bob"}[i%2])
		m.Header.Set(records.HeaderDeadReason, []string{"rejected", "failed", "decode"}[i%3])
		m.Header.Set(records.HeaderError, fmt.Sprintf("error number %d", i))
		m.Data = []byte(`{}`)
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	st, err := js.Stream(ctx, n.DeadStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, seqs[5]); err != nil { // discarded
		t.Fatal(err)
	}
	list := func(q store.DeadQuery) ([]uint64, int) {
		got, pages := listAll(t, q.Limit, func(cursor string) ([]store.DeadLetter, string, bool, error) {
			q.Cursor = cursor
			p, err := e.client.DeadLetters(ctx, q)
			return p.DeadLetters, p.Cursor, p.More, err
		})
		var out []uint64
		for _, d := range got {
			out = append(out, d.Seq)
		}
		return out, pages
	}
	want := func(keep func(i int) bool) []uint64 {
		var out []uint64
		for i, s := range seqs {
			if i != 5 && keep(i) {
				out = append(out, s)
			}
		}
		return out
	}
	all := want(func(int) bool { return true })
	if got, pages := list(store.DeadQuery{Limit: 3}); !slices.Equal(got, all) || pages < 4 {
		t.Fatalf("oldest first: %v in %d pages, want %v", got, pages, all)
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	if got, pages := list(store.DeadQuery{Limit: 3, Order: store.NewestFirst}); !slices.Equal(got, newest) || pages < 4 {
		t.Fatalf("newest first: %v in %d pages, want %v", got, pages, newest)
	}
	for _, c := range []struct {
		what string
		q    store.DeadQuery
		want []uint64
	}{
		{"kind", store.DeadQuery{Kind: "other"}, want(func(i int) bool { return i%4 == 3 })},
		{"effector", store.DeadQuery{Kind: "counter", ID: "c1"}, want(func(i int) bool { return i%3 == 1 && i%4 != 3 })},
		{"owner", store.DeadQuery{Owner: "bob"}, want(func(i int) bool { return i%2 == 1 })},
		{"reason", store.DeadQuery{Reason: "failed", Order: store.NewestFirst}, reversedSeqs(want(func(i int) bool { return i%3 == 1 }))},
		{"text", store.DeadQuery{Text: "NUMBER 1"}, want(func(i int) bool { return i == 1 || i == 10 || i == 11 })},
		{"record id", store.DeadQuery{Text: "rec-07"}, want(func(i int) bool { return i == 7 })},
		{"since later", store.DeadQuery{Since: time.Now().Add(time.Hour)}, nil},
		{"until earlier, newest first", store.DeadQuery{Until: time.Now().Add(-time.Hour), Order: store.NewestFirst}, nil},
	} {
		c.q.Limit = 2
		if got, _ := list(c.q); !slices.Equal(got, c.want) {
			t.Fatalf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	for _, bad := range []store.DeadQuery{
		{ID: "c1"}, {Kind: "a.b"}, {Cursor: "nope"}, {Limit: -1}, {Limit: store.MaxLimit + 1}, {Order: "up"},
		{Text: string(make([]byte, store.MaxSearch+1))},
	} {
		if _, err := e.client.DeadLetters(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func reversedSeqs(s []uint64) []uint64 {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// TestDeadLettersPageBytes: big dead letters end a page at
// MaxDeadPageBytes, and the cursor goes on with the next, in both orders;
// a page that matches none stops reading at its byte budget.
func TestDeadLettersPageBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	n := e.conn.Names()
	const big = 900 << 10
	var seqs []uint64
	for i := range 56 { // 50 MB in all: more than a page reads
		m := nats.NewMsg(n.Dead(records.Ref{Kind: "counter", ID: "big"}))
		m.Header.Set(records.HeaderID, records.DeadID(fmt.Sprintf("big-%d", i)))
		m.Header.Set(records.HeaderDeadReason, "rejected")
		m.Data = make([]byte, big)
		ack, err := e.conn.JetStream().PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	perPage := store.MaxDeadPageBytes / (big + 100)
	for _, order := range []store.Order{store.OldestFirst, store.NewestFirst} {
		var got []uint64
		var sizes []int
		cursor := ""
		for range 30 {
			p, err := e.client.DeadLetters(ctx, store.DeadQuery{Order: order, Cursor: cursor, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(p.DeadLetters))
			for _, d := range p.DeadLetters {
				got = append(got, d.Seq)
			}
			if !p.More {
				break
			}
			cursor = p.Cursor
		}
		want := slices.Clone(seqs)
		if order == store.NewestFirst {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) || sizes[0] != perPage || len(sizes) < 2 {
			t.Fatalf("order %q: %v in pages of %v, want %v in pages of %d", order, got, sizes, want, perPage)
		}
		// A filter that matches none: the first page stops reading before
		// the end (empty, with More), and the cursor gets through.
		cursor = ""
		pages := 0
		for ; pages < 20; pages++ {
			p, err := e.client.DeadLetters(ctx, store.DeadQuery{Order: order, Owner: "nobody", Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.DeadLetters) != 0 {
				t.Fatalf("order %q: owner nobody lists %d", order, len(p.DeadLetters))
			}
			if pages == 0 && !p.More {
				t.Fatalf("order %q: the first page read all 50 MB", order)
			}
			if !p.More {
				break
			}
			cursor = p.Cursor
		}
		if pages < 1 || pages >= 20 {
			t.Fatalf("order %q: %d pages to read 50 MB", order, pages+1)
		}
	}
}
