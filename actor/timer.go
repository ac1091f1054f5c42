package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bounds of timers. Everything a timer is built from is bounded: its name
// ([bus.MaxTimerName], one subject token), its delay, interval and cron
// pattern, its payload and the number of timers one effector holds.
const (
	// MaxTimersPerEffector is how many timers one effector may hold at once.
	// Setting one more fails with [ErrTooManyTimers]; replacing a timer of
	// the same name does not count.
	MaxTimersPerEffector = 1000
	// MaxTimerPayload is the largest payload of a timer, in bytes.
	MaxTimerPayload = 64 << 10
	// MaxTimerDelay is the furthest in the future a timer may fire, and
	// the longest interval of a repeating one.
	MaxTimerDelay = 10 * 366 * 24 * time.Hour
	// MinTimerInterval is the shortest interval of a repeating timer (the
	// NATS server's own minimum for @every).
	MinTimerInterval = time.Second
	// MaxCronLen is the longest cron pattern, in bytes.
	MaxCronLen = 128
)

// ErrTooManyTimers: the effector already holds [MaxTimersPerEffector]
// timers. Cancel some first.
var ErrTooManyTimers = errors.New("too many timers")

// Headers of timers. A schedule message carries the record's envelope, the
// NATS schedule headers and HeaderTimer; the record a timer fires carries
// the envelope, HeaderTimer and HeaderTimerDue.
const (
	// HeaderTimer is the name of the timer that set or fired a record.
	HeaderTimer = bus.HeaderTimer
	// HeaderTimerDue is, on a fired record, the time the server fired the
	// timer (RFC 3339 with nanoseconds) when the forwarder saw it first.
	HeaderTimerDue = "EA-Timer-Fired"
)

// cancelTTL is how long a cancellation (a roll-up with no schedule) stays.
const cancelTTL = "60s"

// Schedule says when a timer fires: exactly one of At (once), Every
// (repeating on an interval) or Cron (repeating on a cron pattern of six
// fields, seconds first, or @hourly, @daily, @weekly, @monthly, @yearly).
type Schedule struct {
	At    time.Time
	Every time.Duration
	Cron  string
	// TimeZone is an IANA time zone for Cron (UTC when empty).
	TimeZone string
}

// pattern returns the Nats-Schedule header value of s, checked.
func (s Schedule) pattern(now time.Time) (string, error) {
	set := 0
	if !s.At.IsZero() {
		set++
	}
	if s.Every != 0 {
		set++
	}
	if s.Cron != "" {
		set++
	}
	if set != 1 {
		return "", fmt.Errorf("%w: timer schedule: set exactly one of at, every and cron (got %d)", ErrInvalid, set)
	}
	if s.TimeZone != "" && s.Cron == "" {
		return "", fmt.Errorf("%w: timer schedule: a time zone goes only with cron", ErrInvalid)
	}
	switch {
	case !s.At.IsZero():
		if s.At.After(now.Add(MaxTimerDelay)) {
			return "", fmt.Errorf("%w: timer at %s: more than %s ahead", ErrInvalid, s.At.UTC().Format(time.RFC3339), MaxTimerDelay)
		}
		return "@at " + s.At.UTC().Format(time.RFC3339Nano), nil
	case s.Every != 0:
		if s.Every < MinTimerInterval || s.Every > MaxTimerDelay {
			return "", fmt.Errorf("%w: timer interval %s: must be %s to %s", ErrInvalid, s.Every, MinTimerInterval, MaxTimerDelay)
		}
		return "@every " + s.Every.String(), nil
	}
	if err := checkCron(s.Cron); err != nil {
		return "", err
	}
	if s.TimeZone != "" {
		if len(s.TimeZone) > 64 {
			return "", fmt.Errorf("%w: timer time zone: at most 64 characters (got %d)", ErrInvalid, len(s.TimeZone))
		}
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			return "", fmt.Errorf("%w: timer time zone %q: %w", ErrInvalid, s.TimeZone, err)
		}
	}
	return s.Cron, nil
}

// checkCron checks the shape of a cron pattern: six fields of 0-9 A-Z a-z
// * / , - ?, or one of the named schedules. The server checks the values.
func checkCron(c string) error {
	if len(c) > MaxCronLen {
		return fmt.Errorf("%w: cron pattern: at most %d characters (got %d)", ErrInvalid, MaxCronLen, len(c))
	}
	switch c {
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		return nil
	}
	fields := strings.Fields(c)
	if len(fields) != 6 {
		return fmt.Errorf("%w: cron pattern %q: want six fields (second minute hour day month weekday) or @hourly/@daily/@weekly/@monthly/@yearly, got %d fields", ErrInvalid, c, len(fields))
	}
	for _, f := range fields {
		for i := 0; i < len(f); i++ {
			ch := f[i]
			if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || strings.IndexByte("*/,-?", ch) >= 0) {
				return fmt.Errorf("%w: cron pattern %q: character %q is not allowed", ErrInvalid, c, ch)
			}
		}
	}
	return nil
}

// Timer is a timer as listed: its effector, name and schedule, and the
// record it fires.
type Timer struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name"`
	// Schedule is the NATS schedule: "@at <time>", "@every <interval>" or
	// a cron pattern.
	Schedule string `json:"schedule"`
	TimeZone string `json:"time_zone,omitempty"`
	// Type is the EA-Type of the record the timer fires.
	Type string `json:"type"`
	// Payload is the payload of the record as JSON (converted from msgpack).
	Payload json.RawMessage `json:"payload,omitempty"`
	// SetBy is the record (EA-Cause) that set the timer, when logic set it.
	SetBy string    `json:"set_by,omitempty"`
	Set   time.Time `json:"set"`
	// Seq is the timer stream's sequence of the schedule message.
	Seq uint64 `json:"seq"`
}

// scheduleMsg is the schedule message of timer name of target firing rec.
func scheduleMsg(names bus.Names, target records.Ref, name, pattern, tz string, rec records.Record) *nats.Msg {
	return names.TimerMsg(target, name, pattern, tz, rec)
}

// cancelMsg replaces the schedule of timer name of target with a message
// that has none (a roll-up of the subject), which expires after cancelTTL.
func cancelMsg(names bus.Names, target records.Ref, name, id string) *nats.Msg {
	msg := nats.NewMsg(names.TimerSchedule(target, name))
	if id != "" {
		msg.Header.Set(jetstream.MsgIDHeader, id)
	}
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Header.Set("Nats-TTL", cancelTTL)
	msg.Header.Set(HeaderTimer, name)
	return msg
}

// TimerOption adjusts a timer set from logic.
type TimerOption func(*timerSpec) error

type timerSpec struct {
	name string
	tz   string
	send []SendOption
}

// Named names the timer (by default a timer set with After or At is named
// after the record that set it). Setting a timer of an existing name
// replaces it; [Context.CancelTimer] cancels it by name.
func Named(name string) TimerOption {
	return func(s *timerSpec) error {
		if err := bus.ValidateTimerName(name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		s.name = name
		return nil
	}
}

// InZone sets the time zone of a cron reminder (an IANA name).
func InZone(tz string) TimerOption {
	return func(s *timerSpec) error { s.tz = tz; return nil }
}

// WithRecord applies send options (such as [InProcess] or [JSON]) to the
// record the timer fires.
func WithRecord(opts ...SendOption) TimerOption {
	return func(s *timerSpec) error { s.send = append(s.send, opts...); return nil }
}

// After sets a timer that sends the effector a record of type typ with
// payload after d (0 to [MaxTimerDelay]). Like records sent, it takes effect
// only if the logic succeeds, and once however often the record is retried.
// It returns the timer's name: the one given with [Named], or one derived
// from the record in hand and the timer's position among its outputs.
func (c *Context) After(d time.Duration, typ string, payload any, opts ...TimerOption) (string, error) {
	if d < 0 || d > MaxTimerDelay {
		return "", Permanent(fmt.Errorf("%w: timer delay %s: must be 0 to %s", ErrInvalid, d, MaxTimerDelay))
	}
	return c.setTimer(Schedule{At: c.timerNow().Add(d)}, typ, payload, opts)
}

// At sets a timer that sends the effector a record of type typ with
// payload at t (a time in the past fires at once). See [Context.After].
func (c *Context) At(t time.Time, typ string, payload any, opts ...TimerOption) (string, error) {
	return c.setTimer(Schedule{At: t}, typ, payload, opts)
}

// Every sets a reminder named name that sends the effector a record of type
// typ with payload every interval ([MinTimerInterval] to [MaxTimerDelay])
// until cancelled.
func (c *Context) Every(name string, interval time.Duration, typ string, payload any, opts ...TimerOption) error {
	_, err := c.setTimer(Schedule{Every: interval}, typ, payload, append([]TimerOption{Named(name)}, opts...))
	return err
}

// Cron sets a reminder named name that sends the effector a record of type
// typ with payload on a cron pattern (six fields, seconds first:
// "0 */5 * * * *" is every five minutes; or @hourly, @daily, @weekly,
// @monthly, @yearly), in UTC unless [InZone] says otherwise.
func (c *Context) Cron(name, pattern string, typ string, payload any, opts ...TimerOption) error {
	_, err := c.setTimer(Schedule{Cron: pattern}, typ, payload, append([]TimerOption{Named(name)}, opts...))
	return err
}

// CancelTimer cancels the effector's timer or reminder name once the logic
// succeeds. Cancelling a timer that does not exist (or already fired) does
// nothing.
func (c *Context) CancelTimer(name string) error {
	if err := bus.ValidateTimerName(name); err != nil {
		return Permanent(fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	id := c.outputID(strconv.Itoa(len(c.outs)))
	msg := cancelMsg(c.names, c.self, name, id)
	c.outs = append(c.outs, output{subject: msg.Subject, stream: true, rec: records.Record{ID: id, Type: "timer-cancel"}, msg: msg})
	if c.timerNames != nil {
		delete(c.timerNames, name)
	}
	return nil
}

func (c *Context) timerNow() time.Time {
	if c.now.IsZero() {
		c.now = time.Now().UTC()
	}
	return c.now
}

// setTimer holds the schedule message of a timer until the logic succeeds.
func (c *Context) setTimer(s Schedule, typ string, payload any, opts []TimerOption) (string, error) {
	var spec timerSpec
	for _, opt := range opts {
		if err := opt(&spec); err != nil {
			return "", Permanent(err)
		}
	}
	s.TimeZone = spec.tz
	pattern, err := s.pattern(c.timerNow())
	if err != nil {
		return "", Permanent(err)
	}
	rec, err := c.build(typ, payload, spec.send)
	if err != nil {
		return "", Permanent(err)
	}
	if len(rec.Payload) > MaxTimerPayload {
		return "", Permanent(fmt.Errorf("%w: timer %q: payload of %d bytes exceeds %d", ErrTooLarge, typ, len(rec.Payload), MaxTimerPayload))
	}
	name := spec.name
	if name == "" {
		name = "t" + idTagShort(rec.ID)
	}
	if err := c.countTimer(name); err != nil {
		return "", err
	}
	msg := scheduleMsg(c.names, c.self, name, pattern, s.TimeZone, rec)
	c.outs = append(c.outs, output{subject: msg.Subject, stream: true, rec: rec, msg: msg})
	return name, nil
}

// idTagShort is a name for a timer derived from the id of the record that
// sets it: a hash, so that it is a subject token of bounded length.
func idTagShort(id string) string {
	return idTag([]byte("ea-timer-name"), records.Ref{}, 0, id, "")[:16]
}

// countTimer fails with ErrTooManyTimers when setting timer name would make
// the effector hold more than MaxTimersPerEffector timers.
func (c *Context) countTimer(name string) error {
	if c.timerNames == nil {
		c.timerNames = map[string]struct{}{}
		if c.timerList != nil {
			have, err := c.timerList(c, c.self)
			if err != nil {
				return fmt.Errorf("count the timers of %s: %w", c.self, err)
			}
			c.timerNames = have
		}
	}
	if _, ok := c.timerNames[name]; ok {
		return nil
	}
	if len(c.timerNames) >= MaxTimersPerEffector {
		return Permanent(fmt.Errorf("%w: %s holds %d timers, the most one effector may hold: cancel some first", ErrTooManyTimers, c.self, len(c.timerNames)))
	}
	c.timerNames[name] = struct{}{}
	return nil
}

// timerNames returns the names of the timers r holds (schedule messages,
// not cancellations).
func (n *Node) timerNames(ctx context.Context, r records.Ref) (map[string]struct{}, error) {
	return timerNamesIn(ctx, n.timerStream, n.names, r)
}

func timerNamesIn(ctx context.Context, s jetstream.Stream, names bus.Names, r records.Ref) (map[string]struct{}, error) {
	if s == nil {
		return nil, fmt.Errorf("timer stream %s: not open", names.TimerStream())
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(names.TimerSchedules(r)))
	if err != nil {
		return nil, err
	}
	out := make(map[string]struct{}, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		if _, name, ok := names.TimerOf(subject); ok {
			out[name] = struct{}{}
		}
	}
	return out, nil
}

// listTimers returns the timers r holds, by name.
func listTimers(ctx context.Context, s jetstream.Stream, names bus.Names, r records.Ref) ([]Timer, error) {
	have, err := timerNamesIn(ctx, s, names, r)
	if err != nil {
		return nil, err
	}
	out := make([]Timer, 0, len(have))
	for name := range have {
		m, err := s.GetLastMsgForSubject(ctx, names.TimerSchedule(r, name))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pattern := m.Header.Get("Nats-Schedule")
		if pattern == "" {
			continue // cancelled
		}
		t := Timer{Kind: r.Kind, ID: r.ID, Name: name, Schedule: pattern, TimeZone: m.Header.Get("Nats-Schedule-Time-Zone"), Seq: m.Sequence, Set: m.Time}
		if rec, err := records.FromMsg(m.Subject, m.Header, m.Data); err == nil {
			t.Type, t.SetBy = rec.Type, rec.Cause
			t.Payload = payloadJSON(rec)
		}
		out = append(out, t)
	}
	sortTimers(out)
	return out, nil
}

func sortTimers(ts []Timer) {
	slices.SortFunc(ts, func(a, b Timer) int { return strings.Compare(a.Name, b.Name) })
}

// payloadJSON is rec's payload as JSON, or nil when it has none or does not
// convert.
func payloadJSON(rec records.Record) json.RawMessage {
	if len(rec.Payload) == 0 {
		return nil
	}
	if rec.ContentType == records.ContentJSON {
		return json.RawMessage(rec.Payload)
	}
	var v any
	if err := codec.Unmarshal(rec.Payload, &v); err != nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
