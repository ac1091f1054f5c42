package actor_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
)

// TestPositions covers the position vector without a server: Seen keeps the
// next sequence and only moves forward, String and ParsePositions are each
// other's inverse, and malformed strings are refused with ErrInvalid.
func TestPositions(t *testing.T) {
	t.Parallel()
	p := actor.Positions{}
	p.Seen("EA_OUT_1_OF_3", 120)
	p.Seen("EA_OUT_0_OF_3", 87)
	p.Seen("EA_OUT_1_OF_3", 5) // behind: no move
	if got, want := p.String(), "EA_OUT_0_OF_3:88,EA_OUT_1_OF_3:121"; got != want {
		t.Fatalf("String %q, want %q", got, want)
	}
	back, err := actor.ParsePositions(p.String())
	if err != nil || back.String() != p.String() {
		t.Fatalf("ParsePositions(%q) = %v, %v", p.String(), back, err)
	}
	if e, err := actor.ParsePositions(""); err != nil || e == nil || len(e) != 0 {
		t.Fatalf("ParsePositions(\"\") = %#v, %v, want an empty vector", e, err)
	}
	if got := p.At("EA_OUT_2_OF_3"); got != 1 {
		t.Fatalf("At of a stream not in the vector: %d, want 1 (its first record)", got)
	}
	for _, bad := range []string{"EA_OUT", "EA_OUT:", ":5", "EA_OUT:x", "EA_OUT:-1", "EA_OUT:0", "A:1,A:2", "A:1,", "A:1,,B:2"} {
		if _, err := actor.ParsePositions(bad); !errors.Is(err, actor.ErrInvalid) {
			t.Errorf("ParsePositions(%q): %v, want ErrInvalid", bad, err)
		}
	}
	for _, tc := range []struct {
		p    actor.Positions
		want string // in the error
	}{
		{actor.Positions{"EA_OUT_7_OF_3": 3}, `"EA_OUT_7_OF_3": not one of this deployment's (A, B)`},
		{actor.Positions{"A": 0}, "position of A is 0"},
	} {
		err := tc.p.Check([]string{"A", "B"})
		if !errors.Is(err, actor.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%v): %v, want ErrInvalid saying %q", tc.p, err, tc.want)
		}
	}
	if err := (actor.Positions{"A": 1, "B": 9}).Check([]string{"A", "B"}); err != nil {
		t.Fatal(err)
	}
}

// TestResumeKindPositions: SubscribeKind resumes every stream from a
// position vector, with stream groups (records spread over the 3 groups'
// outbox streams) and with one stream (one entry): read part of the
// outputs, stop, more outputs are emitted, resume from the vector (kept as
// a string, as across processes) — exactly the outputs after the positions
// come, per stream in order, none twice, none missing. OutboxPositions
// starts at the end of every stream; Subscribe of one effector takes a
// kind's vector; bad vectors and FromSeq with groups are refused.
func TestResumeKindPositions(t *testing.T) {
	t.Parallel()
	for _, groups := range []int{3, 1} {
		t.Run(fmt.Sprint("groups=", groups), func(t *testing.T) {
			t.Parallel()
			testResumeKind(t, groups)
		})
	}
}

func testResumeKind(t *testing.T, groups int) {
	const (
		counters = 9
		first    = 6 // incs per counter before the first subscription stops
		more     = 5 // incs per counter while it is stopped
	)
	srv := bustest.NewServer(t)
	cfg := bus.Config{Partitions: 8, Groups: groups}
	if groups > 1 {
		srv.MapPartitions(t, 8)
	}
	conn := srv.Connect(t, cfg)
	n := conn.Names()
	startNode(t, srv.Connect(t, cfg), nil)
	c := newClient(t, conn)
	refs := createCounters(t, c, counters)
	if groups > 1 {
		used := map[int]bool{}
		for _, r := range refs {
			used[n.GroupOf(r)] = true
		}
		if len(used) < 2 {
			t.Fatalf("the counters are all in group(s) %v: the test proves nothing", used)
		}
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Minute)
	defer cancel()

	for _, r := range refs {
		publishIncs(t, conn, r, first)
	}
	for _, r := range refs {
		waitCountOnly(t, c, r, first, 60*time.Second)
	}

	// Read half of the outputs from an empty vector (every stream from
	// its first record), keeping the vector up to date; then stop.
	pos := actor.Positions{}
	recs, err := c.SubscribeKind(ctx, "counter", actor.FromPositions(pos))
	if err != nil {
		t.Fatal(err)
	}
	// At least half, and until records of two streams came (a stream's
	// records may all come before another's).
	half := 0
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(n.OutboxStreams(), rec.Stream) {
			t.Fatalf("record %s from stream %q, not an outbox stream of %v", rec.ID, rec.Stream, n.OutboxStreams())
		}
		pos.Seen(rec.Stream, rec.Seq)
		if half++; half >= counters*first/2 && len(pos) >= min(2, groups) || half == counters*first {
			break
		}
	}
	if groups > 1 && len(pos) < 2 {
		t.Fatalf("the first %d outputs came from stream(s) %v only: the test proves nothing", half, pos)
	}
	kept := pos.String() // as a process would store it

	// A vector of the next sequence of every stream, taken before more
	// outputs: it starts with the next record of each.
	now, err := c.OutboxPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != groups {
		t.Fatalf("OutboxPositions %v: want one entry per outbox stream %v", now, n.OutboxStreams())
	}

	for _, r := range refs {
		publishIncs(t, conn, r, more)
	}
	for _, r := range refs {
		waitCountOnly(t, c, r, first+more, 60*time.Second)
	}
	all := allOutputs(t, ctx, c, counters*(first+more))

	// Resume from the kept vector: exactly the outputs at or after each
	// stream's position, each once, each stream's in order.
	resumeAt, err := actor.ParsePositions(kept)
	if err != nil {
		t.Fatal(err)
	}
	streams := resumeFrom(t, ctx, c, resumeAt, all, counters*(first+more)-half)
	if groups > 1 && len(streams) < 2 {
		t.Fatalf("the resumed outputs came from stream(s) %v only: the test proves nothing", streams)
	}
	// From OutboxPositions: exactly the outputs emitted after it.
	resumeFrom(t, ctx, c, now, all, counters*more)
	// A stream the vector does not name is read from its first record.
	partial := actor.Positions{}
	for s, seq := range resumeAt {
		if s != n.OutboxStreamOf(0) {
			partial[s] = seq
		}
	}
	resumeFrom(t, ctx, c, partial, all, -1)
	resumeFrom(t, ctx, c, actor.Positions{}, all, len(all))

	// One effector's subscription takes a kind's vector: its stream's
	// entry.
	one := refs[0]
	sub, err := c.Subscribe(ctx, one, actor.FromPositions(resumeAt))
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range sub {
		if err != nil {
			t.Fatal(err)
		}
		if rec.From != one || rec.Stream != n.OutboxStreamFor(one) || rec.Seq < resumeAt.At(rec.Stream) {
			t.Fatalf("Subscribe(%s) from %s: record from %s at %s:%d", one, kept, rec.From, rec.Stream, rec.Seq)
		}
		break
	}

	// Vectors of another deployment or layout, and zero positions, are
	// refused, naming what is wrong.
	bad := []struct {
		p    actor.Positions
		want string
	}{
		{actor.Positions{"EA_OUT_7_OF_3": 1}, "EA_OUT_7_OF_3"},
		{actor.Positions{n.MailboxStreamOf(0): 1}, n.MailboxStreamOf(0)},
		{actor.Positions{n.OutboxStreamOf(0): 0}, "is 0"},
	}
	if groups > 1 {
		bad = append(bad, struct {
			p    actor.Positions
			want string
		}{actor.Positions{"EA_OUT": 4}, `"EA_OUT"`})
	} else {
		bad = append(bad, struct {
			p    actor.Positions
			want string
		}{actor.Positions{"EA_OUT_0_OF_3": 4}, "EA_OUT_0_OF_3"})
	}
	for _, b := range bad {
		_, err := c.SubscribeKind(ctx, "counter", actor.FromPositions(b.p))
		if !errors.Is(err, actor.ErrInvalid) || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), n.OutboxStreamOf(0)) {
			t.Fatalf("SubscribeKind FromPositions(%v): %v, want ErrInvalid naming %s and the deployment's streams", b.p, err, b.want)
		}
		if _, err := c.Subscribe(ctx, one, actor.FromPositions(b.p)); !errors.Is(err, actor.ErrInvalid) {
			t.Fatalf("Subscribe FromPositions(%v): %v, want ErrInvalid", b.p, err)
		}
	}
	_, err = c.SubscribeKind(ctx, "counter", actor.FromSeq(5))
	switch {
	case groups > 1 && (!errors.Is(err, actor.ErrInvalid) || !strings.Contains(err.Error(), "FromPositions")):
		t.Fatalf("SubscribeKind FromSeq with groups: %v, want ErrInvalid pointing to FromPositions", err)
	case groups == 1 && err != nil:
		t.Fatalf("SubscribeKind FromSeq with one stream: %v", err)
	}
}

// resumeFrom subscribes to the kind counter from vector p and fails t
// unless exactly the outputs of all at or after p's positions come (those
// of a stream p does not name from its first), each once, each stream's in
// order; want, unless -1, is how many those are. It returns the streams
// they came from.
func resumeFrom(t *testing.T, ctx context.Context, c *actor.Client, p actor.Positions, all map[string]position, want int) map[string]bool {
	t.Helper()
	expect := map[string]bool{}
	for id, at := range all {
		if at.seq >= p.At(at.stream) {
			expect[id] = true
		}
	}
	if want >= 0 && len(expect) != want {
		t.Fatalf("from %s: %d outputs at or after the positions, want %d", p, len(expect), want)
	}
	recs, err := c.SubscribeKind(ctx, "counter", actor.FromPositions(p))
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]uint64{}
	got := map[string]bool{}
	for _, rec := range take(t, recs, len(expect)) {
		switch {
		case rec.Seq < p.At(rec.Stream):
			t.Fatalf("from %s: record %s at %s:%d, before the position %d", p, rec.ID, rec.Stream, rec.Seq, p.At(rec.Stream))
		case got[rec.ID]:
			t.Fatalf("from %s: record %s (%s:%d) delivered twice", p, rec.ID, rec.Stream, rec.Seq)
		case rec.Seq <= last[rec.Stream]:
			t.Fatalf("from %s: %s:%d after %s:%d, out of order", p, rec.Stream, rec.Seq, rec.Stream, last[rec.Stream])
		case !expect[rec.ID]:
			t.Fatalf("from %s: record %s (%s:%d) is not an output of the test", p, rec.ID, rec.Stream, rec.Seq)
		}
		last[rec.Stream], got[rec.ID] = rec.Seq, true
	}
	// len(expect) records, each expected and none twice: all of them.
	streams := map[string]bool{}
	for s := range last {
		streams[s] = true
	}
	return streams
}

// take returns the first n records of recs, failing t on an error or when
// fewer come before the subscription's context ends.
func take(t *testing.T, recs iter.Seq2[records.Record, error], n int) []records.Record {
	t.Helper()
	var out []records.Record
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		if out = append(out, rec); len(out) == n {
			break
		}
	}
	if len(out) != n {
		t.Fatalf("%d records, want %d", len(out), n)
	}
	return out
}

// position is where a record is: its stream and sequence.
type position struct {
	stream string
	seq    uint64
}

// allOutputs reads the kind counter's n outputs from the start and returns
// each one's position by id.
func allOutputs(t *testing.T, ctx context.Context, c *actor.Client, n int) map[string]position {
	t.Helper()
	recs, err := c.SubscribeKind(ctx, "counter", actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]position{}
	for _, rec := range take(t, recs, n) {
		all[rec.ID] = position{rec.Stream, rec.Seq}
	}
	if len(all) != n {
		t.Fatalf("%d distinct outputs, want %d", len(all), n)
	}
	return all
}
