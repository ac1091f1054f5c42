package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// TestTailLastPages: tail --last above the record store's page (1000) reads
// the latest records in pages and prints exactly that many, oldest first,
// ending with the newest; more than there are prints them all.
func TestTailLastPages(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/many").ok(t, "create")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{URL: w.url})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	const total = 2105
	ref := records.Ref{Kind: "counter", ID: "many"}
	for i := 1; i <= total; i++ {
		rec, err := records.New("inc", map[string]int{"by": 1})
		if err != nil {
			t.Fatal(err)
		}
		rec.ID = fmt.Sprintf("many-%d", i)
		if _, err := c.Send(ctx, ref, rec); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(r result) []string { return strings.Split(strings.TrimSpace(r.out), "\n") }
	actortest.Eventually(t, 30*time.Second, "the record store indexed every record", func() bool {
		r := w.ea(t, "", "tail", "mailbox", "counter/many", "--last", "1")
		return r.code == 0 && strings.Contains(r.out, fmt.Sprintf("id=many-%d ", total))
	})
	r := w.ea(t, "", "tail", "mailbox", "counter/many", "--last", "2001").ok(t, "tail --last 2001")
	got := lines(r)
	if len(got) != 2001 {
		t.Fatalf("tail --last 2001 printed %d lines", len(got))
	}
	for i, l := range []string{got[0], got[1000], got[2000]} {
		want := fmt.Sprintf("id=many-%d ", total-2000+[]int{0, 1000, 2000}[i])
		if !strings.Contains(l, want) {
			t.Errorf("line %d: %q, want %s", []int{0, 1000, 2000}[i], l, want)
		}
	}
	r = w.ea(t, "", "tail", "mailbox", "counter/many", "--last", "5000").ok(t, "tail --last 5000")
	if got := lines(r); len(got) != total || !strings.Contains(got[0], "id=many-1 ") || !strings.Contains(got[total-1], fmt.Sprintf("id=many-%d ", total)) {
		t.Errorf("tail --last 5000 of %d records: %d lines, first %q", total, len(got), got[0])
	}
}

// TestTimerCancelGone: cancelling a timer that is not there (never set, or
// fired already) exits with status 3 and says why; cancelling one that is
// there exits 0.
func TestTimerCancelGone(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/tg").ok(t, "create")
	w.ea(t, "", "timer", "cancel", "counter/tg", "never").fails(t, "cancel of a timer never set", exitNotFound, `no timer "never"`)
	w.ea(t, "", "timer", "cancel", "counter/tg", "never", "--json").fails(t, "cancel --json of a timer never set", exitNotFound, "never set, has fired already")

	w.ea(t, "", "timer", "set", "counter/tg", "soon", "--after", "1s", "--type", "inc", `{"by":1}`).ok(t, "timer set")
	actortest.Eventually(t, 30*time.Second, "the timer fires", func() bool {
		return strings.Contains(w.ea(t, "", "state", "counter/tg").out, `{"count":1}`)
	})
	w.ea(t, "", "timer", "cancel", "counter/tg", "soon").fails(t, "cancel of a timer that fired", exitNotFound, "ea timer ls counter/tg")

	w.ea(t, "", "timer", "set", "counter/tg", "later", "--after", "1h").ok(t, "timer set")
	if r := w.ea(t, "", "timer", "cancel", "counter/tg", "later").ok(t, "cancel"); !strings.Contains(r.out, "cancelled") {
		t.Errorf("timer cancel printed %q", r.out)
	}
}
