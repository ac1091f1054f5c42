package actor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/vmihailenco/msgpack/v5"
)

// The state of kind "vtally" through three versions: v1 counts in n, v2
// renames it count (a v1 document decodes into TallyV2 without error, with
// count 0: exactly what a version must prevent), v3 adds the records' types.
type (
	tallyV1 struct {
		N int `json:"n"`
	}
	tallyV2 struct {
		Count int `json:"count"`
	}
	tallyV3 struct {
		Count int            `json:"count"`
		Types map[string]int `json:"types"`
	}
)

func upV1(old tallyV1) (tallyV2, error) {
	if old.N < 0 {
		return tallyV2{}, fmt.Errorf("a negative tally %d cannot be upgraded", old.N)
	}
	return tallyV2{Count: old.N}, nil
}

func upV2(old tallyV2) (tallyV3, error) {
	return tallyV3{Count: old.Count, Types: map[string]int{"before-v3": old.Count}}, nil
}

// versionedKind returns kind "vtally" at version v (1 or 2): every record adds
// one.
func versionedKind(v int) actor.Definition {
	switch v {
	case 1:
		return actor.Kind[tallyV1]{Name: "vtally", Logic: func(_ *actor.Context, s tallyV1) (tallyV1, error) {
			s.N++
			return s, nil
		}}
	case 2:
		return actor.Kind[tallyV2]{Name: "vtally", Version: 2,
			Upgrades: []actor.Upgrade{actor.UpgradeFrom(1, upV1)},
			Logic: func(_ *actor.Context, s tallyV2) (tallyV2, error) {
				s.Count++
				return s, nil
			}}
	}
	panic("no such version")
}

// versionedV3Kind is kind "vtally" at version 3.
func versionedV3Kind() actor.Kind[tallyV3] {
	return actor.Kind[tallyV3]{Name: "vtally", Version: 3,
		Upgrades: []actor.Upgrade{actor.UpgradeFrom(2, upV2), actor.UpgradeFrom(1, upV1)},
		Logic: func(ctx *actor.Context, s tallyV3) (tallyV3, error) {
			s.Count++
			if s.Types == nil {
				s.Types = map[string]int{}
			}
			s.Types[ctx.Record().Type]++
			return s, nil
		}}
}

// TestUpgradeChain: Kind.UpgradeState runs the steps from any supported
// version, in order, to the kind's type; a newer version, a failing or
// panicking step, a state that does not fit the step and a version older
// than the oldest step are errors matching ErrStateVersion that say which.
func TestUpgradeChain(t *testing.T) {
	t.Parallel()
	k := versionedV3Kind()
	got, err := k.UpgradeState(1, tallyV1{N: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 5 || got.Types["before-v3"] != 5 || len(got.Types) != 1 {
		t.Fatalf("v1 {n:5} upgraded to %+v, want count 5 and types {before-v3: 5}", got)
	}
	if got, err = k.UpgradeState(2, tallyV2{Count: 7}); err != nil || got.Count != 7 || got.Types["before-v3"] != 7 {
		t.Fatalf("v2 {count:7} upgraded to %+v, %v", got, err)
	}
	raw, err := codec.Marshal(tallyV3{Count: 9, Types: map[string]int{"inc": 9}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err = k.UpgradeState(3, msgpack.RawMessage(raw)); err != nil || got.Count != 9 || got.Types["inc"] != 9 {
		t.Fatalf("v3 as it is: %+v, %v", got, err)
	}
	if got, err = k.UpgradeState(0, tallyV1{N: 2}); err != nil || got.Count != 2 {
		t.Fatalf("version 0 (absent) is 1: %+v, %v", got, err)
	}

	var sv *actor.StateVersionError
	_, err = k.UpgradeState(4, tallyV3{})
	if !errors.Is(err, actor.ErrStateVersion) || !errors.As(err, &sv) || sv.Have != 4 || sv.Want != 3 || sv.Err != nil {
		t.Fatalf("a newer state: %v, want a StateVersionError 4 > 3", err)
	}
	if !strings.Contains(err.Error(), "version 4, newer than this node's kind (version 3)") {
		t.Fatalf("newer: %q does not say so", err)
	}
	_, err = k.UpgradeState(1, tallyV1{N: -1})
	if !errors.Is(err, actor.ErrStateVersion) || !strings.Contains(err.Error(), "step from version 1 to 2: a negative tally -1 cannot be upgraded") {
		t.Fatalf("a failing step: %v", err)
	}
	_, err = k.UpgradeState(1, map[string]any{"n": "five"})
	if !errors.Is(err, actor.ErrStateVersion) || !strings.Contains(err.Error(), "does not decode into actor_test.tallyV1") {
		t.Fatalf("a state that does not fit the step: %v", err)
	}

	boom := actor.Kind[tallyV2]{Name: "vtally", Version: 2, Logic: tallyV3Logic2,
		Upgrades: []actor.Upgrade{actor.UpgradeFrom(1, func(tallyV1) (tallyV2, error) { panic("boom") })}}
	if _, err = boom.UpgradeState(1, tallyV1{}); !errors.Is(err, actor.ErrStateVersion) || !strings.Contains(err.Error(), "panicked: boom") {
		t.Fatalf("a panicking step: %v", err)
	}

	recent := actor.Kind[tallyV3]{Name: "vtally", Version: 3, Logic: versionedV3Kind().Logic,
		Upgrades: []actor.Upgrade{actor.UpgradeFrom(2, upV2)}} // step 1 dropped
	if _, err = recent.UpgradeState(1, tallyV1{}); !errors.Is(err, actor.ErrStateVersion) || !strings.Contains(err.Error(), "no upgrade from version 1 (its oldest is from version 2)") {
		t.Fatalf("older than the oldest step: %v", err)
	}
}

func tallyV3Logic2(_ *actor.Context, s tallyV2) (tallyV2, error) { return s, nil }

// TestKindVersionInvalid: a kind's Version and Upgrades are checked when it
// is hosted, each mistake named.
func TestKindVersionInvalid(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	step := func(from int) actor.Upgrade {
		return actor.UpgradeFrom(from, func(s tallyV2) (tallyV2, error) { return s, nil })
	}
	for _, tc := range []struct {
		name    string
		version int
		ups     []actor.Upgrade
		want    string
	}{
		{"negative", -1, nil, "Version -1 must be between 1 and"},
		{"no step", 2, nil, "Version 2 needs an upgrade from version 1"},
		{"last step missing", 3, []actor.Upgrade{step(1)}, "Version 3 needs an upgrade from version 2"},
		{"gap", 4, []actor.Upgrade{step(1), step(3)}, "the upgrades skip version 2"},
		{"twice", 2, []actor.Upgrade{step(1), step(1)}, "two upgrades from version 1"},
		{"from 0", 2, []actor.Upgrade{step(0), step(1)}, "an upgrade from version 0"},
		{"from the version", 2, []actor.Upgrade{step(1), step(2)}, "an upgrade from version 2"},
		{"at version 1", 0, []actor.Upgrade{step(1)}, "an upgrade from version 1"},
		{"nil function", 2, []actor.Upgrade{actor.UpgradeFrom[tallyV1, tallyV2](1, nil)}, "has no function"},
		{"zero upgrade", 2, []actor.Upgrade{{From: 1}}, "has no function"},
	} {
		n, err := actor.NewNode(conn, actor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		k := actor.Kind[tallyV2]{Name: "vtally", Version: tc.version, Upgrades: tc.ups, Logic: tallyV3Logic2}
		err = n.Host(k)
		if !errors.Is(err, actor.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Host: %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
		if _, err := k.UpgradeState(1, tallyV1{}); !errors.Is(err, actor.ErrInvalid) {
			t.Errorf("%s: UpgradeState: %v, want ErrInvalid", tc.name, err)
		}
	}
}

// storedDocument reads r's state document as stored, with its revision
// and the keys of its msgpack map.
func storedDocument(t *testing.T, conn *bus.Conn, r records.Ref) (actor.Document, uint64, map[string]any) {
	t.Helper()
	bucket, err := conn.StateBucket(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(ctxT(t), conn.Names().StateKey(r))
	if err != nil {
		t.Fatal(err)
	}
	var doc actor.Document
	var keys map[string]any
	if err := codec.Unmarshal(ent.Value(), &doc); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(ent.Value(), &keys); err != nil {
		t.Fatal(err)
	}
	return doc, ent.Revision(), keys
}

// tallyOf decodes the count of a tally document at its version.
func tallyOf(t *testing.T, doc actor.Document) int {
	t.Helper()
	switch doc.StateVersion() {
	case 1:
		var s tallyV1
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s.N
	case 2:
		var s tallyV2
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s.Count
	}
	t.Fatalf("%s: state version %d", doc.Ref(), doc.StateVersion())
	return 0
}

// waitTally waits until r's stored document is at version v with count n.
func waitTally(t *testing.T, conn *bus.Conn, r records.Ref, v, n int) {
	t.Helper()
	actortest.Eventually(t, 60*time.Second, fmt.Sprintf("%s at version %d with count %d", r, v, n), func() bool {
		doc, _, _ := storedDocument(t, conn, r)
		return doc.StateVersion() == v && tallyOf(t, doc) == n
	})
}

// TestVersionUpgradeOnLoad: documents a version 1 node wrote (without a
// "version" key) are upgraded by a version 2 node when it loads them and
// stored at version 2 by its next write, the count carried over; an
// effector it creates starts at version 2.
func TestVersionUpgradeOnLoad(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	ctx := ctxT(t)
	a, b := ref("vtally", "a"), ref("vtally", "b")
	v1 := startNode(t, conn, nil, versionedKind(1))
	for _, r := range []records.Ref{a, b} {
		if _, err := c.Create(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	publishIncs(t, conn, a, 3)
	publishIncs(t, conn, b, 2)
	waitTally(t, conn, a, 1, 3)
	waitTally(t, conn, b, 1, 2)
	if _, _, keys := storedDocument(t, conn, a); keys["version"] != nil {
		t.Fatalf("a version 1 document has key version: %v", keys)
	}
	v1.Stop(t)

	v2 := startNode(t, conn, nil, versionedKind(2))
	publishIncs(t, conn, a, 2)
	waitTally(t, conn, a, 2, 5)
	doc, _, keys := storedDocument(t, conn, a)
	if keys["version"] == nil || doc.Version != 2 {
		t.Fatalf("upgraded document: version %d, keys %v", doc.Version, keys)
	}
	if got := metricSum(t, v2.Registry, "ea_state_upgrades_total", "kind", "vtally"); got != 1 {
		t.Fatalf("ea_state_upgrades_total %v, want 1 (a only)", got)
	}
	// b, not loaded, is still at version 1: upgrades happen on load.
	if doc, _, _ := storedDocument(t, conn, b); doc.StateVersion() != 1 || tallyOf(t, doc) != 2 {
		t.Fatalf("b: version %d, want 1 until loaded", doc.StateVersion())
	}
	created := ref("vtally", "new")
	if _, err := c.Create(ctx, created, nil); err != nil {
		t.Fatal(err)
	}
	if doc, _, _ := storedDocument(t, conn, created); doc.Version != 2 {
		t.Fatalf("created by a version 2 node: version %d", doc.Version)
	}
	got, err := c.State(ctx, a)
	if err != nil || got.Version != 2 {
		t.Fatalf("State of a: version %d, %v", got.Version, err)
	}
	if n := metricSum(t, v2.Registry, "ea_dead_letters_total"); n != 0 {
		t.Fatalf("%v dead letters", n)
	}
}

// TestVersionRefusal: a version 1 node meeting a document a version 2 node
// wrote neither applies its records nor dead-letters them nor writes the
// document: the refusal is counted once, and the records wait until a
// version 2 node reads the partition, which applies each once.
func TestVersionRefusal(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	ctx := ctxT(t)
	r := ref("vtally", "r")
	v2 := startNode(t, conn, nil, versionedKind(2))
	if _, err := c.Create(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, 4)
	waitTally(t, conn, r, 2, 4)
	v2.Stop(t)
	_, rev, _ := storedDocument(t, conn, r)

	var logs proctest.Buffer
	opts := actor.Options{StallAfter: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	v1 := startNodeWith(t, conn, opts, nil, versionedKind(1))
	// An activation with no record waiting answers at once: nothing waits.
	actortest.Eventually(t, 60*time.Second, "an activation", func() bool {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := c.Activate(actx, r)
		return err == nil
	})
	if got := metricSum(t, v1.Registry, "ea_state_version_refusals_total", "kind", "vtally"); got != 0 {
		t.Fatalf("refusals %v after an activation alone, want 0", got)
	}
	publishIncs(t, conn, r, 3)
	actortest.Eventually(t, 60*time.Second, "a refusal", func() bool {
		return metricSum(t, v1.Registry, "ea_state_version_refusals_total", "kind", "vtally") == 1
	})
	// It looks again (after 1s, then 2s): still refused, counted and
	// logged once, and the stall watch sees it.
	actortest.Eventually(t, 60*time.Second, "a second look", func() bool {
		return strings.Count(logs.String(), "state document still not usable at this version") >= 2
	})
	actortest.Eventually(t, 60*time.Second, "the stall watch to see it", func() bool {
		return metricSum(t, v1.Registry, "ea_effectors_stalled", "kind", "vtally") == 1
	})
	if got := metricSum(t, v1.Registry, "ea_state_version_refusals_total", "kind", "vtally"); got != 1 {
		t.Fatalf("refusals %v, want 1 per wait", got)
	}
	warn := grepLine(logs.String(), "newer version of the kind")
	for _, want := range []string{"level=WARN", "effector=vtally/r", "state_version=2", "kind_version=1", "a node of version 2 or later must process it"} {
		if !strings.Contains(warn, want) {
			t.Errorf("refusal warning %q lacks %q", warn, want)
		}
	}
	// The first look refuses with the records delivered by then: the first
	// of the three, or more (it failed in CI with held=1 where the test
	// wanted all three).
	if !regexp.MustCompile(` held=[123] `).MatchString(warn) {
		t.Errorf("refusal warning %q does not say it holds 1 to 3 records", warn)
	}
	if n := strings.Count(logs.String(), "newer version of the kind"); n != 1 {
		t.Errorf("the refusal is logged %d times at WARN, want once", n)
	}
	for _, m := range []string{"ea_dead_letters_total", "ea_records_processed_total"} {
		if got := metricSum(t, v1.Registry, m); got != 0 {
			t.Fatalf("%s %v on the version 1 node, want 0", m, got)
		}
	}
	if doc, now, _ := storedDocument(t, conn, r); now != rev || doc.Version != 2 {
		t.Fatalf("the version 2 document was written by the version 1 node: revision %d -> %d, version %d", rev, now, doc.Version)
	}
	v1.Stop(t)

	v2 = startNode(t, conn, nil, versionedKind(2))
	waitTally(t, conn, r, 2, 7)
	if got := metricSum(t, v2.Registry, "ea_dead_letters_total"); got != 0 {
		t.Fatalf("%v dead letters", got)
	}
	if got := metricSum(t, v2.Registry, "ea_records_processed_total", "outcome", "ok"); got != 3 {
		t.Fatalf("the version 2 node applied %v records, want the 3 that waited", got)
	}
}

// TestVersionUpgradeFailure: an upgrade that fails makes the records wait
// (counted once, never dead letters); a reset gives the effector a state at
// the kind's version, and the records that waited are applied to it.
func TestVersionUpgradeFailure(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	ctx := ctxT(t)
	r := ref("vtally", "neg")
	v1 := startNode(t, conn, nil, versionedKind(1))
	if _, err := c.Create(ctx, r, tallyV1{N: -5}); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, 1)
	waitTally(t, conn, r, 1, -4)
	v1.Stop(t)

	v2 := startNode(t, conn, nil, versionedKind(2))
	publishIncs(t, conn, r, 2)
	actortest.Eventually(t, 60*time.Second, "an upgrade failure", func() bool {
		return metricSum(t, v2.Registry, "ea_state_upgrade_failures_total", "kind", "vtally") == 1
	})
	if doc, _, _ := storedDocument(t, conn, r); doc.StateVersion() != 1 || tallyOf(t, doc) != -4 {
		t.Fatalf("the document changed: version %d", doc.StateVersion())
	}
	if got := metricSum(t, v2.Registry, "ea_dead_letters_total"); got != 0 {
		t.Fatalf("%v dead letters", got)
	}
	doc, err := c.Reset(ctx, r, tallyV2{Count: 100})
	if err != nil || doc.Version != 2 {
		t.Fatalf("reset: version %d, %v", doc.Version, err)
	}
	waitTally(t, conn, r, 2, 102)
	if got := metricSum(t, v2.Registry, "ea_state_upgrade_failures_total", "kind", "vtally"); got != 1 {
		t.Fatalf("failures %v, want 1", got)
	}
}

// TestVersionBadDocument: a "version" that is not a state version makes
// the document corrupt (ErrCorruptState, naming the field), never a version
// to act on.
func TestVersionBadDocument(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, versionedKind(2))
	c := newClient(t, conn)
	for i, v := range []any{-1, "two", int64(1) << 40, 2.5} {
		r := ref("vtally", fmt.Sprint("bad", i))
		b, err := codec.Marshal(map[string]any{"id": r.ID, "kind": r.Kind, "status": "IDLE", "seq": 0, "version": v})
		if err != nil {
			t.Fatal(err)
		}
		putJunk(t, conn, r, b)
		_, err = c.State(ctxT(t), r)
		if !errors.Is(err, actor.ErrCorruptState) || !strings.Contains(err.Error(), `field "version"`) {
			t.Errorf("version %v: %v, want ErrCorruptState naming the field", v, err)
		}
	}
}

// TestVersionReplay: a replay on a version 2 node of an effector created
// and run at version 1 upgrades the state it was created with and the
// stored one before comparing: equal, at version 2's shape.
func TestVersionReplay(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	c := newClient(t, conn)
	ctx := ctxT(t)
	r := ref("vtally", "replayed")
	v1 := startNode(t, conn, nil, versionedKind(1))
	if _, err := c.Create(ctx, r, tallyV1{N: 10}); err != nil {
		t.Fatal(err)
	}
	publishIncs(t, conn, r, 3)
	waitTally(t, conn, r, 1, 13)
	v1.Stop(t)

	startNode(t, conn, nil, versionedKind(2))
	rep, err := c.Replay(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal || rep.From != actor.ReplayFromCreated || !strings.Contains(string(rep.Replayed), `"count":13`) || !strings.Contains(string(rep.Stored), `"count":13`) {
		t.Fatalf("replay: equal %v from %s, stored %s, replayed %s (%s)", rep.Equal, rep.From, rep.Stored, rep.Replayed, rep.Difference)
	}
}
