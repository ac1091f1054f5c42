package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
)

// TestTimer: ea timer set, ls and cancel drive a counter's timers; a timer
// of type inc fires as an inc record; bad input exits with a clear error.
func TestTimer(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/t1").ok(t, "create")
	r := w.ea(t, "", "timer", "set", "counter/t1", "bump", "--after", "1s", "--type", "inc", `{"by":3}`).ok(t, "timer set")
	if !strings.Contains(r.out, "timer bump of counter/t1 set: @at ") {
		t.Fatalf("timer set printed %q", r.out)
	}
	w.ea(t, "", "timer", "set", "counter/t1", "tick", "--every", "1h", "--type", "inc").ok(t, "timer set --every")
	r = w.ea(t, "", "timer", "ls", "counter/t1", "--json").ok(t, "timer ls")
	var list actor.TimerListReply
	if err := json.Unmarshal([]byte(r.out), &list); err != nil {
		t.Fatalf("timer ls --json: %v: %q", err, r.out)
	}
	if len(list.Timers) != 2 || list.Timers[1].Name != "tick" || list.Timers[1].Schedule != "@every 1h0m0s" {
		t.Fatalf("timers: %+v", list.Timers)
	}
	r = w.ea(t, "", "timer", "cancel", "counter/t1", "tick").ok(t, "timer cancel")
	if !strings.Contains(r.out, "cancelled") {
		t.Fatalf("timer cancel printed %q", r.out)
	}
	actortest.Eventually(t, 30*time.Second, "the timer fires", func() bool {
		return strings.Contains(w.ea(t, "", "state", "counter/t1").out, `{"count":3}`)
	})
	r = w.ea(t, "", "timer", "ls", "counter/t1").ok(t, "timer ls")
	if strings.Contains(r.out, "bump") || strings.Contains(r.out, "tick") {
		t.Fatalf("timers left after firing and cancel: %q", r.out)
	}
	r = w.ea(t, "", "timer", "set", "counter/t1", "bad.name", "--after", "1s")
	if r.code == 0 || !strings.Contains(r.err, "timer name") {
		t.Fatalf("bad name: exit %d, stderr %q", r.code, r.err)
	}
	r = w.ea(t, "", "timer", "set", "counter/t1", "n", "--every", "10ms")
	if r.code == 0 || !strings.Contains(r.err, "interval") {
		t.Fatalf("short interval: exit %d, stderr %q", r.code, r.err)
	}
}
