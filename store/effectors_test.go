package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

func errorsIsInvalid(err error) bool { return errors.Is(err, store.ErrInvalid) }

func putDoc(t testing.TB, e *env, doc actor.Document) uint64 {
	t.Helper()
	ctx := context.Background()
	kv, err := e.conn.StateBucketOf(ctx, e.conn.Names().GroupOf(records.Ref{Kind: doc.Kind, ID: doc.ID}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := codec.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(ctx, doc.Kind+"."+doc.ID, b)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func TestEffectors(t *testing.T) {
	t.Parallel()
	effectorsTable(t, newEnv(t))
}

// TestEffectorsStreamGroups is TestEffectors with 3 stream groups: the
// effectors' documents are in three buckets, listed one after the other.
func TestEffectorsStreamGroups(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t, 3)
	groups := map[int]bool{}
	for i := range 25 {
		groups[e.conn.Names().GroupOf(records.Ref{Kind: "k", ID: fmt.Sprintf("e%02d", i)})] = true
	}
	if len(groups) != 3 {
		t.Fatalf("k/e00..k/e24 in groups %v, want all 3", groups)
	}
	effectorsTable(t, e)
}

func effectorsTable(t *testing.T, e *env) {
	ctx := context.Background()
	for i := range 25 {
		st := actor.StatusIdle
		if i%5 == 0 {
			st = actor.StatusError
		}
		putDoc(t, e, actor.Document{ID: fmt.Sprintf("e%02d", i), Kind: "k", Status: st, Seq: uint64(i), Updated: time.Now().UTC()})
	}
	putDoc(t, e, actor.Document{ID: "other", Kind: "k2", Status: actor.StatusIdle})
	// Rewrite e03 twice: it must be listed once, with its last document.
	putDoc(t, e, actor.Document{ID: "e03", Kind: "k", Status: actor.StatusIdle, Seq: 100})
	putDoc(t, e, actor.Document{ID: "e03", Kind: "k", Status: actor.StatusIdle, Seq: 101})

	list := func(q store.EffectorQuery) []store.Effector {
		var out []store.Effector
		for pages := 0; pages < 100; pages++ {
			p, err := e.client.Effectors(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Effectors) > q.Limit && q.Limit > 0 {
				t.Fatalf("page of %d", len(p.Effectors))
			}
			out = append(out, p.Effectors...)
			if !p.More {
				return out
			}
			q.Cursor = p.Cursor
		}
		t.Fatal("too many pages")
		return nil
	}
	got := list(store.EffectorQuery{Kind: "k", Limit: 4})
	var names []string
	for _, ef := range got {
		names = append(names, ef.ID)
		if ef.ID == "e03" && ef.Seq != 101 {
			t.Errorf("e03 listed with seq %d", ef.Seq)
		}
		if ef.Kind != "k" || ef.Revision == 0 {
			t.Errorf("effector %+v", ef)
		}
	}
	slices.Sort(names)
	if len(names) != 25 || slices.Compact(slices.Clone(names))[24] != "e24" {
		t.Fatalf("listed %v", names)
	}
	errs := list(store.EffectorQuery{Kind: "k", Status: actor.StatusError, Limit: 2})
	if len(errs) != 5 {
		t.Fatalf("%d in ERROR, want 5", len(errs))
	}

	// A cursor at the end picks up what changes later.
	p, err := e.client.Effectors(ctx, store.EffectorQuery{Kind: "k", Limit: 1000})
	if err != nil || p.More || len(p.Effectors) != 25 {
		t.Fatalf("one page: %d %v %v", len(p.Effectors), p.More, err)
	}
	putDoc(t, e, actor.Document{ID: "e07", Kind: "k", Status: actor.StatusTerminated})
	p, err = e.client.Effectors(ctx, store.EffectorQuery{Kind: "k", Cursor: p.Cursor})
	if err != nil || len(p.Effectors) != 1 || p.Effectors[0].Status != actor.StatusTerminated {
		t.Fatalf("after the end: %+v %v", p, err)
	}

	for _, tt := range []struct {
		q    store.EffectorQuery
		want []error
	}{
		{store.EffectorQuery{Kind: "ghost"}, []error{store.ErrInvalid, store.ErrUnknownKind}},
		{store.EffectorQuery{Kind: "a.b"}, []error{store.ErrInvalid}},
		{store.EffectorQuery{Kind: "k", Limit: 10_000}, []error{store.ErrPageTooLarge}},
		{store.EffectorQuery{Kind: "k", Cursor: "x"}, []error{store.ErrBadCursor}},
		{store.EffectorQuery{Kind: "k", Status: "NAPPING"}, []error{store.ErrInvalid}},
	} {
		_, err := e.client.Effectors(ctx, tt.q)
		isErr(t, err, tt.want...)
	}
}

func TestKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	place, err := e.conn.JetStream().KeyValue(ctx, e.conn.Names().PlaceBucket())
	if err != nil {
		t.Fatal(err)
	}
	beat := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, m := range []struct {
		ID    string    `json:"id"`
		Kinds []string  `json:"kinds"`
		Beat  time.Time `json:"beat"`
	}{{"n1", []string{"b", "a"}, beat}, {"n2", []string{"b"}, beat.Add(time.Second)}} {
		b, _ := codec.Marshal(m)
		if _, err := place.Put(ctx, "node."+m.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := place.Put(ctx, "part.a.0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	kinds, err := e.client.Kinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Kind{{Kind: "a", Nodes: []string{"n1"}, Beat: beat}, {Kind: "b", Nodes: []string{"n1", "n2"}, Beat: beat.Add(time.Second)}}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	// A hosted kind with no effectors lists empty, not unknown.
	p, err := e.client.Effectors(ctx, store.EffectorQuery{Kind: "a"})
	if err != nil || len(p.Effectors) != 0 {
		t.Fatalf("%+v %v", p, err)
	}
}

// A real node: effectors created through actor.Client are listed and
// watched.
func TestWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rev1 := putDoc(t, e, actor.Document{ID: "a", Kind: "k", Status: actor.StatusIdle, Seq: 1})
	putDoc(t, e, actor.Document{ID: "b", Kind: "k", Status: actor.StatusIdle, Seq: 1})

	w, err := e.client.Watch(ctx, store.WatchOptions{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func(w *store.Watcher) store.StateEvent { t.Helper(); return nextEvent(t, w) }
	for _, id := range []string{"a", "b"} {
		if ev := next(w); ev.Effector.ID != id {
			t.Fatalf("initial %+v", ev)
		}
	}
	rev3 := putDoc(t, e, actor.Document{ID: "a", Kind: "k", Status: actor.StatusProcessing, Seq: 2})
	if ev := next(w); ev.Effector != (records.Ref{Kind: "k", ID: "a"}) || ev.Document.Seq != 2 || ev.Revision != rev3 {
		t.Fatalf("update %+v", ev)
	}

	// One effector, resumed from a revision: every change since, in order.
	one, err := e.client.Watch(ctx, store.WatchOptions{Kind: "k", ID: "a", From: rev1})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(one); ev.Revision != rev1 || ev.Document.Seq != 1 {
		t.Fatalf("resume 1: %+v", ev)
	}
	if ev := next(one); ev.Revision != rev3 || ev.Document.Seq != 2 {
		t.Fatalf("resume 2: %+v", ev)
	}
	one.Stop()
	if _, ok := <-one.Events(); ok {
		t.Fatal("events open after Stop")
	}
	_, err = e.client.Watch(ctx, store.WatchOptions{Kind: ""})
	isErr(t, err, store.ErrInvalid)
}

// TestWatchStreamGroups: with 3 stream groups a watch of every effector of
// a kind follows every group's state bucket: the current documents of
// effectors in several groups, then their changes, in order per effector;
// it takes no resume revision (a revision is one bucket's), and Stop ends
// it.
func TestWatchStreamGroups(t *testing.T) {
	t.Parallel()
	e := newGroupsEnv(t, 3)
	n := e.conn.Names()
	ctx := context.Background()
	groups := map[int]bool{}
	var ids []string
	for i := 0; len(ids) < 4 || len(groups) < 2; i++ {
		if i == 32 {
			t.Fatalf("32 effectors all in group(s) %v", groups)
		}
		id := fmt.Sprint("e", i)
		putDoc(t, e, actor.Document{ID: id, Kind: "k", Status: actor.StatusIdle, Seq: 1})
		groups[n.GroupOf(records.Ref{Kind: "k", ID: id})] = true
		ids = append(ids, id)
	}
	if _, err := e.client.Watch(ctx, store.WatchOptions{Kind: "k", From: 2}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a kind-wide watch from a revision with groups: %v, want ErrInvalid", err)
	}
	w, err := e.client.Watch(ctx, store.WatchOptions{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	next := func() store.StateEvent { t.Helper(); return nextEvent(t, w) }
	seen := map[string]uint64{}
	for range ids {
		ev := next()
		seen[ev.Effector.ID] = ev.Document.Seq
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("initial documents %v: want each of %v at seq 1", seen, ids)
		}
	}
	for _, id := range ids {
		putDoc(t, e, actor.Document{ID: id, Kind: "k", Status: actor.StatusIdle, Seq: 2})
	}
	for range ids {
		ev := next()
		if ev.Document.Seq != 2 {
			t.Fatalf("change %+v, want seq 2", ev)
		}
		seen[ev.Effector.ID] = ev.Document.Seq
	}
	w.Stop()
	if _, ok := <-w.Events(); ok {
		t.Fatal("events open after Stop")
	}
}

// nextEvent is w's next event, failing t when none comes within 10s or
// the watcher closed.
func nextEvent(t *testing.T, w *store.Watcher) store.StateEvent {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watcher closed: %v", w.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return store.StateEvent{}
}

// TestWatchResumePositions: a watch of every effector of a kind resumes
// from a revision per state bucket, with stream groups (effectors spread
// over several of the 3 buckets) and with one bucket (one entry): watch,
// read some changes, stop, more changes are written, resume from the
// vector (kept as a string) — exactly the changes at or after each
// bucket's position come, each bucket's in order, none twice, none
// missing. A bucket the vector does not name starts with its current
// documents; bad vectors are refused.
func TestWatchResumePositions(t *testing.T) {
	t.Parallel()
	for _, groups := range []int{3, 1} {
		t.Run(fmt.Sprint("groups=", groups), func(t *testing.T) {
			t.Parallel()
			var e *env
			if groups > 1 {
				e = newGroupsEnv(t, groups)
			} else {
				e = newEnv(t)
			}
			testWatchResume(t, e)
		})
	}
}

// change is one write of a state document: where, and what.
type change struct {
	bucket string
	rev    uint64
	id     string
	seq    uint64
}

func testWatchResume(t *testing.T, e *env) {
	const effectors = 8
	n := e.conn.Names()
	ctx := context.Background()
	var all []change
	put := func(seq uint64) {
		for i := range effectors {
			id := fmt.Sprint("e", i)
			rev := putDoc(t, e, actor.Document{ID: id, Kind: "k", Status: actor.StatusIdle, Seq: seq})
			all = append(all, change{n.StateBucketFor(records.Ref{Kind: "k", ID: id}), rev, id, seq})
		}
	}
	put(1)
	buckets := map[string]bool{}
	for _, c := range all {
		buckets[c.bucket] = true
	}
	if n.Groups() > 1 && len(buckets) < 2 {
		t.Fatalf("the effectors are all in bucket(s) %v: the test proves nothing", buckets)
	}

	// The current documents, then half of the next changes; then stop.
	pos := actor.Positions{}
	w, err := e.client.Watch(ctx, store.WatchOptions{Kind: "k", Positions: actor.Positions{}})
	if err != nil {
		t.Fatal(err)
	}
	for range effectors {
		ev := nextEvent(t, w)
		if ev.Bucket != n.StateBucketFor(ev.Effector) || ev.Document.Seq != 1 {
			t.Fatalf("initial %+v: want seq 1 from bucket %s", ev, n.StateBucketFor(ev.Effector))
		}
		pos.Seen(ev.Bucket, ev.Revision)
	}
	put(2)
	for range effectors / 2 {
		ev := nextEvent(t, w)
		pos.Seen(ev.Bucket, ev.Revision)
	}
	w.Stop()
	kept := pos.String()
	put(3)

	resumeAt, err := actor.ParsePositions(kept)
	if err != nil {
		t.Fatal(err)
	}
	expect := map[change]bool{}
	for _, c := range all {
		if _, ok := resumeAt[c.bucket]; !ok {
			t.Fatalf("vector %s lacks bucket %s, though the watch delivered its documents", kept, c.bucket)
		}
		if c.rev >= resumeAt[c.bucket] {
			expect[c] = true
		}
	}
	if want := effectors/2 + effectors; len(expect) != want {
		t.Fatalf("%d changes at or after %s, want %d", len(expect), kept, want)
	}
	watchExactly(t, e, store.WatchOptions{Kind: "k", Positions: resumeAt}, expect)

	// A bucket the vector does not name: its current documents (seq 3),
	// the others from their positions.
	dropped := n.StateBucketOf(0)
	partial := actor.Positions{}
	for b, rev := range resumeAt {
		if b != dropped {
			partial[b] = rev
		}
	}
	expect = map[change]bool{}
	for _, c := range all {
		if c.bucket == dropped && c.seq == 3 || c.bucket != dropped && c.rev >= partial[c.bucket] {
			expect[c] = true
		}
	}
	watchExactly(t, e, store.WatchOptions{Kind: "k", Positions: partial}, expect)

	// One effector's watch takes a kind's vector: its bucket's entry.
	one := records.Ref{Kind: "k", ID: "e0"}
	expect = map[change]bool{}
	for _, c := range all {
		if c.id == one.ID && c.rev >= resumeAt.At(c.bucket) {
			expect[c] = true
		}
	}
	watchExactly(t, e, store.WatchOptions{Kind: "k", ID: one.ID, Positions: resumeAt}, expect)

	// Bad vectors, and From with them, are refused, naming what is wrong.
	other := "ea_state_0_of_3"
	if n.Groups() > 1 {
		other = "ea_state"
	}
	for _, tc := range []struct {
		o    store.WatchOptions
		want string
	}{
		{store.WatchOptions{Kind: "k", Positions: actor.Positions{"ea_state_7_of_3": 1}}, "ea_state_7_of_3"},
		{store.WatchOptions{Kind: "k", Positions: actor.Positions{other: 1}}, `"` + other + `"`},
		{store.WatchOptions{Kind: "k", Positions: actor.Positions{"KV_" + n.StateBucketOf(0): 1}}, "KV_"},
		{store.WatchOptions{Kind: "k", Positions: actor.Positions{n.StateBucketOf(0): 0}}, "is 0"},
		{store.WatchOptions{Kind: "k", From: 2, Positions: actor.Positions{n.StateBucketOf(0): 2}}, "give one"},
	} {
		_, err := e.client.Watch(ctx, tc.o)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Watch(%+v): %v, want ErrInvalid saying %q", tc.o, err, tc.want)
		}
	}
	if n.Groups() > 1 {
		if _, err := e.client.Watch(ctx, store.WatchOptions{Kind: "k", From: 2}); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "Positions") {
			t.Fatalf("a kind-wide watch from a revision with groups: %v, want ErrInvalid pointing to Positions", err)
		}
	}
}

// watchExactly watches with o and fails t unless exactly the changes of
// expect come, each once, each bucket's in revision order.
func watchExactly(t *testing.T, e *env, o store.WatchOptions, expect map[change]bool) {
	t.Helper()
	w, err := e.client.Watch(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	last := map[string]uint64{}
	got := map[change]bool{}
	for range expect {
		ev := nextEvent(t, w)
		c := change{ev.Bucket, ev.Revision, ev.Effector.ID, ev.Document.Seq}
		switch {
		case got[c]:
			t.Fatalf("from %s: %+v twice", o.Positions, c)
		case !expect[c]:
			t.Fatalf("from %s: %+v, not one of the changes expected %v", o.Positions, c, expect)
		case c.rev <= last[c.bucket]:
			t.Fatalf("from %s: %+v after revision %d of its bucket", o.Positions, c, last[c.bucket])
		}
		got[c], last[c.bucket] = true, c.rev
	}
	select {
	case ev, ok := <-w.Events():
		if ok {
			t.Fatalf("from %s: %+v beyond the %d changes expected", o.Positions, ev, len(expect))
		}
	case <-time.After(200 * time.Millisecond):
	}
}
