package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/internal/codec"
)

// TestReplay: ea replay rebuilds a counter's state from its log and finds
// it equal; after the stored document is tampered with it exits 7 naming
// the difference; unknown effectors and kinds no node hosts fail as
// documented.
func TestReplay(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/r1").ok(t, "create")
	for range 3 {
		w.ea(t, "", "send", "counter/r1", `{"by":2}`, "--type", "inc").ok(t, "send")
	}
	actortest.Eventually(t, 30*time.Second, "three records applied", func() bool {
		return strings.Contains(w.ea(t, "", "state", "counter/r1").out, `{"count":6}`)
	})
	r := w.ea(t, "", "replay", "counter/r1").ok(t, "replay")
	for _, want := range []string{"applied   3\n", "result    equal\n", "from      created\n", `{"count":6}`} {
		if !strings.Contains(r.out, want) {
			t.Fatalf("replay printed %q: want %q", r.out, want)
		}
	}
	r = w.ea(t, "", "replay", "counter/r1", "--json").ok(t, "replay --json")
	var rep actor.ReplayReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("replay --json: %v: %q", err, r.out)
	}
	if !rep.Equal || rep.Applied != 3 || rep.Seq == 0 {
		t.Fatalf("replay --json: %+v", rep)
	}

	// Tamper with the stored count.
	nc, err := nats.Connect(w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := js.KeyValue(t.Context(), "ea_state")
	if err != nil {
		t.Fatal(err)
	}
	ent, err := bucket.Get(t.Context(), "counter.r1")
	if err != nil {
		t.Fatal(err)
	}
	var doc actor.Document
	if err := codec.Unmarshal(ent.Value(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.State, err = codec.Marshal(map[string]int{"count": 7}); err != nil {
		t.Fatal(err)
	}
	b, err := codec.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Update(t.Context(), "counter.r1", b, ent.Revision()); err != nil {
		t.Fatal(err)
	}
	r = w.ea(t, "", "replay", "counter/r1")
	if r.code != exitDiffers || !strings.Contains(r.out, "DIFFERENT") ||
		!strings.Contains(r.err, "state.count: stored 7, replayed 6") {
		t.Fatalf("tampered: exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err)
	}

	w.ea(t, "", "replay", "counter/nobody").fails(t, "replay of an unknown effector", exitNotFound, "not found")
	w.ea(t, "", "replay", "nokind/x").fails(t, "replay of a kind no node hosts", exitUnavailable, "no")
	w.ea(t, "", "replay", "counter/r1", "--from", "{").fails(t, "replay --from bad JSON", exitUsage, "not valid JSON")
}
