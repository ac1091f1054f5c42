package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

func cmdTimer() *command {
	return &command{
		name:  "timer",
		short: "set, cancel and list an effector's durable timers and reminders",
		long: `Durable timers through the control endpoints (<prefix>.ctl.timer-*.<kind>), answered
by any node. A timer sends the effector one record when it fires; a reminder
(--every, --cron) sends one each time until cancelled. Timers survive node and
NATS restarts and fire once (see docs/timers.md).

  ea timer set counter/c1 wake --after 90s --type inc '{"by":1}'
  ea timer set counter/c1 tick --every 1m --type inc '{"by":1}'
  ea timer set counter/c1 nightly --cron "0 0 3 * * *" --tz Europe/Paris
  ea timer ls counter/c1
  ea timer cancel counter/c1 tick`,
		sub: []*command{cmdTimerSet(), cmdTimerCancel(), cmdTimerList()},
	}
}

func cmdTimerSet() *command {
	var req actor.TimerSetRequest
	return &command{
		name: "set", args: "<kind>/<id> <name> [payload-json|-]",
		short: "set (or replace) a timer or reminder",
		long: `Set timer <name> of <kind>/<id>, replacing one of the same name: exactly one of
--after, --at, --every and --cron says when. The record fired has type --type
(default "timer") and the payload given as JSON (none when absent). Names are
1-64 characters of A-Z a-z 0-9 _ -; an effector holds at most 1,000 timers.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&req.After, "after", "", "fire once after this duration (e.g. 90s, 1h30m)")
			fs.StringVar(&req.At, "at", "", "fire once at this RFC 3339 time")
			fs.StringVar(&req.Every, "every", "", "fire every interval (at least 1s) until cancelled")
			fs.StringVar(&req.Cron, "cron", "", `fire on a cron pattern of six fields, seconds first ("0 */5 * * * *"), or @hourly, @daily, @weekly, @monthly, @yearly`)
			fs.StringVar(&req.TimeZone, "tz", "", "time zone of --cron (IANA name; default UTC)")
			fs.StringVar(&req.Type, "type", "", `EA-Type of the record fired (default "timer")`)
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 2, 3); err != nil {
				return err
			}
			ref, err := a.ref(args[0])
			if err != nil {
				return err
			}
			payload, err := a.jsonArg(args, 2, "the payload", false)
			if err != nil {
				return err
			}
			req.Name, req.Payload = args[1], payload
			c, err := a.actorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			t, err := c.SetTimer(cctx, ref, req)
			if err != nil {
				return hostless("timer set", ref, err)
			}
			if a.g.json {
				return a.printJSON(t)
			}
			_, err = fmt.Fprintf(a.stdout, "timer %s of %s set: %s\n", t.Name, ref, t.Schedule)
			return err
		},
	}
}

func cmdTimerCancel() *command {
	return &command{
		name: "cancel", args: "<kind>/<id> <name>",
		short: "cancel a timer or reminder",
		long: `Cancel the timer or reminder <name> of <kind>/<id>. A timer that is not there
(never set, already fired, or cancelled before) is an error: exit status 3,
and nothing was cancelled.`,
		run: onEffector(2, 2, func(cctx context.Context, a *app, c *actor.Client, ref records.Ref, args []string) error {
			ok, err := c.CancelTimer(cctx, ref, args[1])
			if err != nil {
				return hostless("timer cancel", ref, err)
			}
			if !ok {
				return withCode(exitNotFound, fmt.Errorf("timer cancel %s %s: no timer %q: it was never set, has fired already (a one-shot timer), or was cancelled before; nothing was cancelled (ea timer ls %s lists its timers)", ref, args[1], args[1], ref))
			}
			if a.g.json {
				return a.printJSON(actor.TimerCancelReply{Cancelled: ok})
			}
			_, err = fmt.Fprintf(a.stdout, "timer %s of %s: cancelled\n", args[1], ref)
			return err
		}),
	}
}

func cmdTimerList() *command {
	return &command{
		name: "ls", args: "<kind>/<id>",
		short: "list an effector's timers",
		run: onEffector(1, 1, func(cctx context.Context, a *app, c *actor.Client, ref records.Ref, args []string) error {
			ts, err := c.Timers(cctx, ref)
			if err != nil {
				return hostless("timer ls", ref, err)
			}
			if a.g.json {
				return a.printJSON(actor.TimerListReply{Timers: ts})
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSCHEDULE\tTYPE\tSET")
			for _, t := range ts {
				sched := t.Schedule
				if t.TimeZone != "" {
					sched += " (" + t.TimeZone + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Name, sched, t.Type, t.Set.UTC().Format(time.RFC3339))
			}
			return w.Flush()
		}),
	}
}
