package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestTimerNames(t *testing.T) {
	n, err := bus.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	r := records.Ref{Kind: "counter", ID: "c1"}
	for got, want := range map[string]string{
		n.TimerStream():            "EA_TIMERS",
		n.Timers():                 "ea.timer.>",
		n.TimerSchedule(r, "wake"): "ea.timer.set.counter.c1.wake",
		n.TimerSchedules(r):        "ea.timer.set.counter.c1.*",
		n.TimerFire(r, "wake"):     "ea.timer.fire.counter.c1.wake",
		n.TimerFires():             "ea.timer.fire.>",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	for _, s := range []string{n.TimerSchedule(r, "wake"), n.TimerFire(r, "wake")} {
		if got, name, ok := n.TimerOf(s); !ok || got != r || name != "wake" {
			t.Errorf("TimerOf(%q) = %v %q %v", s, got, name, ok)
		}
	}
	for _, s := range []string{"ea.timer.set.counter.c1", "ea.timer.x.counter.c1.w", "ea.mbox.counter.c1", "ea.timer.set.counter.c1.a.b", "ea.timer.set.counter.c1." + strings.Repeat("x", 65)} {
		if _, _, ok := n.TimerOf(s); ok {
			t.Errorf("TimerOf(%q) accepted", s)
		}
	}
	for _, bad := range []string{"", "a.b", "a*", ">", "sp ace", strings.Repeat("x", bus.MaxTimerName+1)} {
		if err := bus.ValidateTimerName(bad); err == nil || !errors.Is(err, records.ErrInvalidName) {
			t.Errorf("ValidateTimerName(%q) = %v; want an error matching records.ErrInvalidName", bad, err)
		}
	}
	if err := bus.ValidateTimerName(strings.Repeat("x", bus.MaxTimerName)); err != nil {
		t.Error(err)
	}
}

// TestProvisionTimers: provisioning creates the timer stream with message
// schedules, and upgrades a timer stream created without them in place,
// keeping its messages; the mailbox stream keeps roll-ups off, so a
// publisher cannot purge mailboxes with Nats-Rollup.
func TestProvisionTimers(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{})
	ctx := t.Context()
	// A timer stream as an older release (or an operator) left it.
	if _, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "EA_TIMERS", Subjects: []string{"ea.timer.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.JetStream().Publish(ctx, "ea.timer.set.counter.c1.old", nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := conn.TimerStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowMsgSchedules || !cfg.AllowMsgTTL || !cfg.AllowRollup || cfg.MaxAge != 0 || s.CachedInfo().State.Msgs != 1 {
		t.Fatalf("timer stream after provisioning: %+v, %d messages", cfg, s.CachedInfo().State.Msgs)
	}
	// A schedule in the timer stream is accepted.
	m := nats.NewMsg("ea.timer.set.counter.c1.wake")
	m.Header.Set("Nats-Schedule", "@every 1h")
	m.Header.Set("Nats-Schedule-Target", "ea.timer.fire.counter.c1.wake")
	if _, err := conn.JetStream().PublishMsg(ctx, m); err != nil {
		t.Fatalf("schedule refused: %v", err)
	}
	mb, err := conn.MailboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mc := mb.CachedInfo().Config; mc.AllowRollup || mc.AllowMsgSchedules {
		t.Fatalf("mailbox stream allows roll-ups (%v) or schedules (%v)", mc.AllowRollup, mc.AllowMsgSchedules)
	}
	roll := nats.NewMsg("ea.mbox.counter.c1")
	roll.Header.Set("Nats-Rollup", "all")
	if _, err := conn.JetStream().PublishMsg(ctx, roll); err == nil {
		t.Fatal("the mailbox stream took a Nats-Rollup: all")
	}
	// A second provisioning leaves it as it is.
	if err := conn.Provision(ctx); err != nil {
		t.Fatal(err)
	}
}
