package bus

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxTimerName is the longest timer name, in bytes.
const MaxTimerName = 64

// ValidateTimerName checks a timer name: one subject token of 1 to
// [MaxTimerName] characters A-Z a-z 0-9 _ -.
func ValidateTimerName(name string) error {
	if name == "" || len(name) > MaxTimerName {
		return fmt.Errorf("%w: timer name %q: must be 1-%d characters (got %d)", records.ErrInvalidName, clip(name), MaxTimerName, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: timer name %q: character %d (%q) is not one of A-Z a-z 0-9 _ -", records.ErrInvalidName, clip(name), i, c)
		}
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > MaxTimerName+8 {
		return s[:MaxTimerName] + "…"
	}
	return s
}

// Headers of timer messages.
const (
	// HeaderTimer names the timer a schedule message sets and a fired
	// record comes from.
	HeaderTimer = "EA-Timer"
	// FiredTTL is how long a fired timer stays in the timer stream once
	// the server fired it (its Nats-TTL): a node forwards it to the mailbox
	// long before, unless no node runs for a week.
	FiredTTL = "168h"
)

// TimerMsg is the schedule message of timer name of effector target: on
// [Names.TimerSchedule], firing rec (its envelope and payload; its id, when
// set, is the message's Nats-Msg-Id, so a repeated publish is dropped) on
// [Names.TimerFire] as the NATS schedule pattern says ("@at <RFC 3339>",
// "@every <duration>" or a cron pattern, in time zone tz when set). It does
// not check its arguments.
func (n Names) TimerMsg(target records.Ref, name, pattern, tz string, rec records.Record) *nats.Msg {
	msg := rec.Msg(n.TimerSchedule(target, name))
	msg.Header.Set("Nats-Schedule", pattern)
	msg.Header.Set("Nats-Schedule-Target", n.TimerFire(target, name))
	msg.Header.Set("Nats-Schedule-TTL", FiredTTL)
	if tz != "" {
		msg.Header.Set("Nats-Schedule-Time-Zone", tz)
	}
	msg.Header.Set(HeaderTimer, name)
	return msg
}

// TimerStream is the stream holding timers (EA_TIMERS): one schedule
// message per timer on [Names.TimerSchedule], and the messages the server
// fires on [Names.TimerFire] until a node forwards them to the mailbox.
func (n Names) TimerStream() string { return n.upper + "_TIMERS" }

// Timers is the subject filter of the timer stream: <prefix>.timer.>.
func (n Names) Timers() string { return n.prefix + ".timer.>" }

// TimerSchedule is the subject of timer name of effector r, holding its
// schedule message: <prefix>.timer.set.<kind>.<id>.<name>.
func (n Names) TimerSchedule(r records.Ref, name string) string {
	return n.prefix + ".timer.set." + r.Kind + "." + r.ID + "." + name
}

// TimerSchedules is the filter of every timer of effector r:
// <prefix>.timer.set.<kind>.<id>.*.
func (n Names) TimerSchedules(r records.Ref) string {
	return n.prefix + ".timer.set." + r.Kind + "." + r.ID + ".*"
}

// TimerFire is the subject a timer of r fires on (its schedule's target):
// <prefix>.timer.fire.<kind>.<id>.<name>.
func (n Names) TimerFire(r records.Ref, name string) string {
	return n.prefix + ".timer.fire." + r.Kind + "." + r.ID + "." + name
}

// TimerFires is the filter of every fired timer: <prefix>.timer.fire.>.
func (n Names) TimerFires() string { return n.prefix + ".timer.fire.>" }

// TimerOf parses a timer schedule or fire subject into the effector and the
// timer name; ok is false when subject is neither or a part is invalid.
func (n Names) TimerOf(subject string) (r records.Ref, name string, ok bool) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".timer.")
	if !ok {
		return r, "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 || (parts[0] != "set" && parts[0] != "fire") {
		return r, "", false
	}
	r = records.Ref{Kind: parts[1], ID: parts[2]}
	if r.Validate() != nil || ValidateTimerName(parts[3]) != nil {
		return records.Ref{}, "", false
	}
	return r, parts[3], true
}

// TimerForwarder is the durable consumer name the nodes share to forward
// fired timers to mailboxes.
func (n Names) TimerForwarder() string { return "forward" }

// timerConfig is the timer stream's configuration. It allows message
// schedules (which the server requires roll-ups for) and per-message TTLs
// (fired timers expire once forwarded and long past). It has no age limit:
// a schedule message must stay until its timer fires, whenever that is.
func (c *Conn) timerConfig() jetstream.StreamConfig {
	n, cfg := c.names, c.cfg
	return jetstream.StreamConfig{
		Name:              n.TimerStream(),
		Description:       "effector timers: schedules and fired timers waiting to be forwarded to mailboxes",
		Subjects:          []string{n.Timers()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          cfg.Replicas,
		Duplicates:        cfg.DuplicateWindow,
		MaxConsumers:      cfg.MaxConsumers,
		AllowDirect:       true,
		AllowMsgSchedules: true,
		AllowMsgTTL:       true,
		AllowRollup:       true,
	}
}

// provisionTimers creates the timer stream, or updates it in place when it
// exists with other settings.
func (c *Conn) provisionTimers(ctx context.Context) error {
	sc := c.timerConfig()
	if err := c.checkStreamPrefix(ctx, sc.Name); err != nil {
		return err
	}
	if s, err := c.JetStream().Stream(ctx, sc.Name); err == nil {
		have := s.CachedInfo().Config
		if slices.Equal(have.Subjects, sc.Subjects) && have.Replicas == sc.Replicas && have.Duplicates == sc.Duplicates &&
			have.AllowMsgSchedules && have.AllowMsgTTL && have.AllowRollup && !have.DenyPurge && have.AllowDirect &&
			have.Description == sc.Description && have.MaxAge == 0 && have.MaxConsumers == sc.MaxConsumers {
			return nil
		}
	}
	if err := retry(ctx, func() error {
		_, err := c.JetStream().CreateOrUpdateStream(ctx, sc)
		return err
	}); err != nil {
		return fmt.Errorf("provision stream %s: %w", sc.Name, c.explain(err))
	}
	return nil
}

// TimerStream returns the timer stream.
func (c *Conn) TimerStream(ctx context.Context) (jetstream.Stream, error) {
	s, err := c.JetStream().Stream(ctx, c.names.TimerStream())
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w (was it provisioned?)", c.names.TimerStream(), err)
	}
	return s, nil
}
