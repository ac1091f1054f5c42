package actor_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// alarmState is what the alarm kind keeps: rings per key, and what its
// logic saw go wrong.
type alarmState struct {
	Rings map[string]int `json:"rings"`
	// Names are the names After returned, by arm key.
	Names map[string]string `json:"names"`
	Err   string            `json:"err"`
}

// arm asks the alarm kind for timers: N one-shot timers After (named
// Name+i when Name is set) with keys Key+i, or a reminder Every, or a cron
// reminder; Cancel cancels a timer by name.
type arm struct {
	Key   string        `json:"key"`
	Name  string        `json:"name"`
	N     int           `json:"n"`
	After time.Duration `json:"after"`
	// At, when set, is when the N timers fire (instead of After).
	At time.Time `json:"at"`
	// Spread, with At, puts timer i at At + i*Spread.
	Spread time.Duration `json:"spread"`
	Every  time.Duration `json:"every"`
	Cron   string        `json:"cron"`
	Cancel string        `json:"cancel"`
	// FailFirst makes the first attempt fail after setting the timers.
	FailFirst bool `json:"fail_first"`
}

type ring struct {
	Key string    `json:"key"`
	Due time.Time `json:"due"`
}

// alarmKind sets timers on "arm" records and counts "ring" records per key.
// attempts counts the attempts of arm records.
func alarmKind(attempts *atomic.Int64) actor.Kind[alarmState] {
	return actor.Kind[alarmState]{
		Name: "alarm",
		Logic: func(ctx *actor.Context, s alarmState) (alarmState, error) {
			if s.Rings == nil {
				s.Rings, s.Names = map[string]int{}, map[string]string{}
			}
			switch ctx.Record().Type {
			case "ring":
				var r ring
				if err := ctx.Decode(&r); err != nil {
					return s, err
				}
				s.Rings[r.Key]++
				return s, nil
			case "arm":
				var a arm
				if err := ctx.Decode(&a); err != nil {
					return s, err
				}
				n := attempts.Add(1)
				if a.Cancel != "" {
					if err := ctx.CancelTimer(a.Cancel); err != nil {
						return s, err
					}
				}
				switch {
				case a.Every > 0:
					if err := ctx.Every(a.Name, a.Every, "ring", ring{Key: a.Key}); err != nil {
						return s, err
					}
				case a.Cron != "":
					if err := ctx.Cron(a.Name, a.Cron, "ring", ring{Key: a.Key}); err != nil {
						return s, err
					}
				default:
					for i := range a.N {
						key := a.Key + strconv.Itoa(i)
						var opts []actor.TimerOption
						if a.Name != "" {
							opts = append(opts, actor.Named(a.Name+strconv.Itoa(i)))
						}
						var name string
						var err error
						if a.At.IsZero() {
							name, err = ctx.After(a.After, "ring", ring{Key: key}, opts...)
						} else {
							due := a.At.Add(time.Duration(i) * a.Spread)
							name, err = ctx.At(due, "ring", ring{Key: key, Due: due}, opts...)
						}
						if err != nil {
							s.Err = err.Error()
							return s, nil
						}
						s.Names[key] = name
					}
				}
				if a.FailFirst && n == 1 {
					return s, errors.New("first attempt fails after setting timers")
				}
				return s, nil
			}
			return s, nil
		},
	}
}

func sendArm(t testing.TB, c *actor.Client, r records.Ref, a arm) {
	t.Helper()
	rec, err := records.New("arm", a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctxT(t), r, rec); err != nil {
		t.Fatal(err)
	}
}

func alarmOf(t testing.TB, c *actor.Client, r records.Ref) alarmState {
	t.Helper()
	doc, err := c.State(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	var s alarmState
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// mailboxRecords reads every record stored in r's mailbox.
func mailboxRecords(t testing.TB, conn *bus.Conn, r records.Ref) []jetstream.RawStreamMsg {
	t.Helper()
	ctx := ctxT(t)
	s, err := conn.MailboxStreamOf(ctx, conn.Names().GroupOf(r))
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.RawStreamMsg
	var seq uint64 = 1
	for {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(conn.Names().StoredMailbox(r)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *m)
		seq = m.Sequence + 1
	}
}

// TestTimerFiresOnce: a timer set from logic whose first attempt fails is
// set once (the failed attempt's timer is never published), fires once as
// an ordinary "ring" record in the mailbox with EA-Timer, and is gone from
// the list after firing.
func TestTimerFiresOnce(t *testing.T) {
	t.Parallel()
	layouts(t, timerFiresOnce)
}

func timerFiresOnce(t *testing.T, conn *bus.Conn) {
	var attempts atomic.Int64
	startNode(t, conn, nil, alarmKind(&attempts))
	c := newClient(t, conn)
	a1 := ref("alarm", "a1")
	actortest.Create(t, c, a1, nil)
	sendArm(t, c, a1, arm{Key: "k", N: 1, After: time.Second, Name: "wake", FailFirst: true})
	actortest.Eventually(t, 30*time.Second, "the timer rings", func() bool { return alarmOf(t, c, a1).Rings["k0"] == 1 })
	if got := attempts.Load(); got != 2 {
		t.Fatalf("arm ran %d times, want 2 (a failure, then success)", got)
	}
	s := alarmOf(t, c, a1)
	if s.Names["k0"] != "wake0" || s.Err != "" {
		t.Fatalf("state %+v: want timer wake0 and no error", s)
	}
	var rings []jetstream.RawStreamMsg
	for _, m := range mailboxRecords(t, conn, a1) {
		if m.Header.Get(records.HeaderType) == "ring" {
			rings = append(rings, m)
		}
	}
	if len(rings) != 1 {
		t.Fatalf("%d ring records in the mailbox, want 1", len(rings))
	}
	m := rings[0]
	if m.Header.Get(actor.HeaderTimer) != "wake0" || !strings.HasPrefix(m.Header.Get(records.HeaderID), "timer:") || m.Header.Get(records.HeaderFrom) != "alarm/a1" || m.Header.Get(actor.HeaderTimerDue) == "" {
		t.Fatalf("fired record headers %v", m.Header)
	}
	ts, err := c.Timers(ctxT(t), a1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 0 {
		t.Fatalf("timers after firing: %+v, want none", ts)
	}
}

// TestCancelledReminderNeverFiresAgain sets a reminder every second, lets
// it ring twice, cancels it together with a one-shot probe timer four
// seconds later, and checks once the probe rang that every ring the
// mailbox holds was fired before the cancellation was stored (its id names
// its sequence in the timer stream).
func TestCancelledReminderNeverFiresAgain(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	var attempts atomic.Int64
	startNode(t, conn, nil, alarmKind(&attempts))
	c := newClient(t, conn)
	a1 := ref("alarm", "a1")
	actortest.Create(t, c, a1, nil)
	sendArm(t, c, a1, arm{Key: "tick", Name: "tick", Every: time.Second})
	actortest.Eventually(t, 30*time.Second, "the reminder rings twice", func() bool { return alarmOf(t, c, a1).Rings["tick"] >= 2 })
	ts, err := c.Timers(ctxT(t), a1)
	if err != nil || len(ts) != 1 || ts[0].Name != "tick" || ts[0].Schedule != "@every 1s" || ts[0].Type != "ring" {
		t.Fatalf("timers = %+v, %v; want reminder tick", ts, err)
	}
	sendArm(t, c, a1, arm{Key: "probe", N: 1, After: 4 * time.Second, Cancel: "tick"})
	actortest.Eventually(t, 30*time.Second, "the probe rings", func() bool { return alarmOf(t, c, a1).Rings["probe0"] == 1 })

	ctx := ctxT(t)
	ts2, err := conn.TimerStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last, err := ts2.GetLastMsgForSubject(ctx, conn.Names().TimerSchedule(a1, "tick"))
	if err != nil {
		// The cancellation expired (after a minute): the schedule is gone.
		t.Logf("cancellation no longer stored: %v", err)
	} else if last.Header.Get("Nats-Schedule") != "" {
		t.Fatalf("reminder tick still scheduled after its cancel: %v", last.Header)
	}
	cancelSeq := uint64(0)
	if err == nil {
		cancelSeq = last.Sequence
	}
	ticks := 0
	for _, m := range mailboxRecords(t, conn, a1) {
		if m.Header.Get(actor.HeaderTimer) != "tick" {
			continue
		}
		ticks++
		seq, err := strconv.ParseUint(strings.TrimPrefix(m.Header.Get(records.HeaderID), "timer:"), 10, 64)
		if err != nil {
			t.Fatalf("ring id %q", m.Header.Get(records.HeaderID))
		}
		if cancelSeq > 0 && seq > cancelSeq {
			t.Fatalf("a ring fired at timer sequence %d, after the cancel at %d", seq, cancelSeq)
		}
	}
	if got := alarmOf(t, c, a1).Rings["tick"]; got != ticks {
		t.Fatalf("state counts %d ticks, the mailbox holds %d", got, ticks)
	}
	if list, err := c.Timers(ctxT(t), a1); err != nil || len(list) != 0 {
		t.Fatalf("timers after cancel = %+v, %v; want none", list, err)
	}
}

// TestThousandTimersAcrossNodeKill sets 1,000 timers (ten effectors, 100
// each) firing over several seconds on two nodes, closes one node's
// connection as the operating system does for a killed process while they
// fire, and checks every timer rang exactly once.
func TestThousandTimersAcrossNodeKill(t *testing.T) {
	const effectors, per = 10, 100
	opts := actor.Options{Heartbeat: 100 * time.Millisecond, HeartbeatTTL: 3 * time.Second}
	cfg := bus.Config{Partitions: 8}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, cfg)
	var attempts atomic.Int64
	var conns []*bus.Conn
	for i := 1; i <= 2; i++ {
		o := opts
		o.NodeID = fmt.Sprintf("n%d", i)
		nc := srv.Connect(t, cfg)
		conns = append(conns, nc)
		startNodeWith(t, nc, o, nil, alarmKind(&attempts))
	}
	c := newClient(t, conn)
	refs := make([]records.Ref, effectors)
	for i := range refs {
		refs[i] = ref("alarm", fmt.Sprintf("a%d", i))
		actortest.Create(t, c, refs[i], nil)
	}
	// Staggered so they fire before, during and after the kill.
	for i, r := range refs {
		sendArm(t, c, r, arm{Key: "k", N: per, After: time.Duration(1+i%5) * time.Second})
	}
	actortest.Eventually(t, 30*time.Second, "some timers ring", func() bool {
		for _, r := range refs {
			if len(alarmOf(t, c, r).Rings) > 0 {
				return true
			}
		}
		return false
	})
	conns[0].NATS().Close()
	killed := time.Now()
	for _, r := range refs {
		actortest.Eventually(t, 90*time.Second, "every timer of "+r.String()+" rings", func() bool {
			return len(alarmOf(t, c, r).Rings) == per
		})
	}
	t.Logf("all %d timers rang %s after the kill", effectors*per, time.Since(killed).Round(time.Millisecond))
	for _, r := range refs {
		s := alarmOf(t, c, r)
		for key, n := range s.Rings {
			if n != 1 {
				t.Errorf("%s: timer %s rang %d times", r, key, n)
			}
		}
		rings := 0
		for _, m := range mailboxRecords(t, conn, r) {
			if m.Header.Get(records.HeaderType) == "ring" {
				rings++
			}
		}
		if rings != per {
			t.Errorf("%s: %d ring records in the mailbox, want %d", r, rings, per)
		}
	}
}

// TestTimerAcrossNATSRestart sets a timer, restarts the NATS server before
// it is due, and checks it rings once.
func TestTimerAcrossNATSRestart(t *testing.T) {
	srv, conn := server(t)
	var attempts atomic.Int64
	startNode(t, conn, nil, alarmKind(&attempts))
	c := newClient(t, conn)
	a1 := ref("alarm", "a1")
	actortest.Create(t, c, a1, nil)
	sendArm(t, c, a1, arm{Key: "k", N: 1, After: 4 * time.Second, Name: "late"})
	actortest.Eventually(t, 30*time.Second, "the timer is set", func() bool {
		ts, err := c.Timers(ctxT(t), a1)
		return err == nil && len(ts) == 1
	})
	srv.Restart(t)
	actortest.Eventually(t, 60*time.Second, "the timer rings after the restart", func() bool {
		s, err := stateOf(c, a1)
		return err == nil && s.Rings["k0"] >= 1
	})
	if got := alarmOf(t, c, a1).Rings["k0"]; got != 1 {
		t.Fatalf("timer rang %d times, want 1", got)
	}
}

func stateOf(c *actor.Client, r records.Ref) (alarmState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	doc, err := c.State(ctx, r)
	if err != nil {
		return alarmState{}, err
	}
	var s alarmState
	return s, doc.Decode(&s)
}

// TestTimerLimits: bad names, delays, intervals, cron patterns and
// payloads are refused with errors saying what was wrong, from logic (the
// error reaches the state) and from outside; the count per effector is
// bounded.
func TestTimerLimits(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	var attempts atomic.Int64
	startNode(t, conn, nil, alarmKind(&attempts))
	c := newClient(t, conn)
	a1 := ref("alarm", "a1")
	actortest.Create(t, c, a1, nil)
	ctx := ctxT(t)
	for _, tc := range []struct {
		req  actor.TimerSetRequest
		want string
	}{
		{actor.TimerSetRequest{Name: "has.dot", After: "1s"}, "timer name"},
		{actor.TimerSetRequest{Name: strings.Repeat("x", 65), After: "1s"}, "1-64"},
		{actor.TimerSetRequest{Name: "n", After: "-1s"}, "after"},
		{actor.TimerSetRequest{Name: "n", After: "1s", Every: "2s"}, "exactly one"},
		{actor.TimerSetRequest{Name: "n"}, "exactly one"},
		{actor.TimerSetRequest{Name: "n", Every: "10ms"}, "interval"},
		{actor.TimerSetRequest{Name: "n", Every: "100000h"}, "interval"},
		{actor.TimerSetRequest{Name: "n", After: "100000h"}, "after"},
		{actor.TimerSetRequest{Name: "n", Cron: "* * *"}, "six fields"},
		{actor.TimerSetRequest{Name: "n", Cron: "* * * * * ;"}, "not allowed"},
		{actor.TimerSetRequest{Name: "n", Cron: "@daily", TimeZone: "Mars/Olympus"}, "time zone"},
		{actor.TimerSetRequest{Name: "n", After: "1s", Payload: []byte(`{"x": "` + strings.Repeat("y", actor.MaxTimerPayload) + `"}`)}, "exceeds"},
	} {
		_, err := c.SetTimer(ctx, a1, tc.req)
		var ce *actor.ControlError
		if !errors.As(err, &ce) || ce.Code != 400 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetTimer(%+v) = %v; want a 400 error mentioning %q", tc.req, err, tc.want)
		}
	}
	// From logic: 1,001 timers are one too many.
	sendArm(t, c, a1, arm{Key: "m", N: actor.MaxTimersPerEffector + 1, After: time.Hour})
	actortest.Eventually(t, 30*time.Second, "the arm record is processed", func() bool { return alarmOf(t, c, a1).Err != "" })
	if s := alarmOf(t, c, a1); !strings.Contains(s.Err, "too many timers") {
		t.Fatalf("state error %q, want too many timers", s.Err)
	}
	// The logic returned no error, so the first 1,000 were set.
	actortest.Eventually(t, 30*time.Second, "1,000 timers listed", func() bool {
		ts, err := c.Timers(ctxT(t), a1)
		return err == nil && len(ts) == actor.MaxTimersPerEffector
	})
	_, err := c.SetTimer(ctx, a1, actor.TimerSetRequest{Name: "more", After: "1h"})
	if err == nil || !strings.Contains(err.Error(), "too many timers") {
		t.Fatalf("SetTimer beyond the limit = %v, want too many timers", err)
	}
	// Replacing an existing timer is not one more.
	if _, err := c.SetTimer(ctx, a1, actor.TimerSetRequest{Name: alarmOf(t, c, a1).Names["m0"], After: "2h"}); err != nil {
		t.Fatalf("replacing timer m0 at the limit: %v", err)
	}
}

// TestTimerFromOutside sets, lists and cancels timers through the control
// endpoints: a timer of type inc on a counter rings as an inc record.
func TestTimerFromOutside(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	c1 := ref("counter", "c1")
	actortest.Create(t, c, c1, nil)
	ctx := ctxT(t)
	tm, err := c.SetTimer(ctx, c1, actor.TimerSetRequest{Name: "bump", After: "1s", Type: "inc", Payload: []byte(`{"by": 5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if tm.Name != "bump" || !strings.HasPrefix(tm.Schedule, "@at ") || tm.Seq == 0 {
		t.Fatalf("timer = %+v", tm)
	}
	if _, err := c.SetTimer(ctx, c1, actor.TimerSetRequest{Name: "never", After: "1h", Type: "inc"}); err != nil {
		t.Fatal(err)
	}
	ts, err := c.Timers(ctx, c1)
	if err != nil || len(ts) != 2 || ts[0].Name != "bump" || ts[1].Name != "never" || string(ts[0].Payload) != `{"by":5}` {
		t.Fatalf("timers = %+v, %v", ts, err)
	}
	ok, err := c.CancelTimer(ctx, c1, "never")
	if err != nil || !ok {
		t.Fatalf("cancel = %v, %v; want true", ok, err)
	}
	ok, err = c.CancelTimer(ctx, c1, "nosuch")
	if err != nil || ok {
		t.Fatalf("cancel of no timer = %v, %v; want false", ok, err)
	}
	ok, err = c.CancelTimer(ctx, c1, "never")
	if err != nil || ok {
		t.Fatalf("second cancel = %v, %v; want false", ok, err)
	}
	waitCountOnly(t, c, c1, 5, 30*time.Second)
	if ts, err := c.Timers(ctx, c1); err != nil || len(ts) != 0 {
		t.Fatalf("timers after firing and cancel = %+v, %v", ts, err)
	}
}

// TestTerminateDropsTimers: terminating an effector removes its timers.
func TestTerminateDropsTimers(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	var attempts atomic.Int64
	startNode(t, conn, nil, alarmKind(&attempts))
	c := newClient(t, conn)
	a1 := ref("alarm", "a1")
	actortest.Create(t, c, a1, nil)
	sendArm(t, c, a1, arm{Key: "k", N: 3, After: time.Hour})
	actortest.Eventually(t, 30*time.Second, "three timers set", func() bool {
		ts, err := c.Timers(ctxT(t), a1)
		return err == nil && len(ts) == 3
	})
	if _, err := c.Terminate(ctxT(t), a1); err != nil {
		t.Fatal(err)
	}
	ts, err := c.Timers(ctxT(t), a1)
	if err != nil || len(ts) != 0 {
		t.Fatalf("timers after terminate = %+v, %v; want none", ts, err)
	}
}

// TestTimerBoundsFromLogic: what logic asks for is checked before anything
// is held, with permanent errors naming the problem.
func TestTimerBoundsFromLogic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(*actor.Context) error
		want string
	}{
		{"negative delay", func(c *actor.Context) error { _, err := c.After(-time.Second, "x", nil); return err }, "timer delay"},
		{"too far", func(c *actor.Context) error { _, err := c.After(actor.MaxTimerDelay+time.Hour, "x", nil); return err }, "timer delay"},
		{"bad name", func(c *actor.Context) error { _, err := c.After(time.Second, "x", nil, actor.Named("a.b")); return err }, "timer name"},
		{"short interval", func(c *actor.Context) error { return c.Every("e", 10*time.Millisecond, "x", nil) }, "interval"},
		{"bad cron", func(c *actor.Context) error { return c.Cron("c", "* *", "x", nil) }, "six fields"},
		{"zone without cron", func(c *actor.Context) error { return c.Every("e", time.Minute, "x", nil, actor.InZone("UTC")) }, "time zone"},
		{"big payload", func(c *actor.Context) error {
			_, err := c.After(time.Second, "x", strings.Repeat("y", actor.MaxTimerPayload+1))
			return err
		}, "exceeds"},
		{"bad cancel", func(c *actor.Context) error { return c.CancelTimer("") }, "timer name"},
	} {
		k := actor.Kind[struct{}]{Name: "k", Logic: func(c *actor.Context, s struct{}) (struct{}, error) { return s, tc.set(c) }}
		_, outs, err := k.Apply(context.Background(), ref("k", "k1"), records.Record{Type: "go"}, struct{}{})
		if err == nil || !actor.IsPermanent(err) || !errors.Is(err, actor.ErrInvalid) && !errors.Is(err, actor.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) || len(outs) != 0 {
			t.Errorf("%s: err %v, %d outputs; want a permanent error mentioning %q and none", tc.name, err, len(outs), tc.want)
		}
	}
}
