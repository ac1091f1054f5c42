package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// kindLoad is one kind's line of ea top.
type kindLoad struct {
	Kind    string `json:"kind"`
	Nodes   int    `json:"nodes"`
	Records uint64 `json:"records"` // records stored in the kind's mailboxes
	Backlog uint64 `json:"backlog"` // not yet acknowledged by the partition consumers
	Dead    uint64 `json:"dead"`    // dead letters of the kind
	// Rates over the last interval (absent in the first sample).
	InPerSec   float64 `json:"in_per_s"`
	DonePerSec float64 `json:"done_per_s"`
	DeadPerSec float64 `json:"dead_per_s"`
}

// topFrame is one refresh of ea top.
type topFrame struct {
	Time  time.Time  `json:"time"`
	Kinds []kindLoad `json:"kinds"`
}

func cmdTop() *command {
	var o struct {
		once     bool
		interval time.Duration
		kind     string
	}
	return &command{
		name: "top", short: "records/s, backlog and dead letters per kind, refreshed",
		long: `Show the load per kind, refreshed every --interval until interrupted:

  RECORDS  records stored in the kind's mailboxes
  IN/S     records arriving per second
  DONE/S   records processed per second (acknowledged by the nodes)
  BACKLOG  records stored but not yet processed (the partition consumers' pending
           and unacknowledged records)
  DEAD     dead letters of the kind; DEAD/S per second

--once samples twice, --interval apart, prints one table and exits (for
scripts; with --json, one JSON object). Counts come from JetStream (one
short-lived consumer per kind and stream, and the partition consumers' info):
cheap whatever the number of effectors.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&o.once, "once", false, "print one table (two samples --interval apart) and exit")
			fs.DurationVar(&o.interval, "interval", 2*time.Second, "time between refreshes")
			fs.StringVar(&o.kind, "kind", "", "only this kind")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 0); err != nil {
				return err
			}
			if o.interval < 10*time.Millisecond {
				return usagef(a.fs.Name(), "--interval %v: want at least 10ms", o.interval)
			}
			if o.kind != "" {
				if err := records.ValidateKind(o.kind); err != nil {
					return usagef(a.fs.Name(), "--kind %q: %v", o.kind, err)
				}
			}
			a.following = !o.once
			conn, err := a.connect(ctx)
			if err != nil {
				return err
			}
			// The streams first: a user who may not read them (the client
			// role) learns it before anything else is asked.
			cctx, cancel := a.call(ctx)
			logs, err := openLogs(cctx, conn)
			cancel()
			if err != nil {
				return err
			}
			r, err := a.storeReader(ctx)
			if err != nil {
				return err
			}
			sample := func() (topFrame, error) {
				cctx, cancel := context.WithTimeout(ctx, 3*a.g.timeout)
				defer cancel()
				kinds, err := r.Kinds(cctx)
				if err != nil {
					return topFrame{}, err
				}
				f := topFrame{Time: a.now()}
				var ks []string
				nodes := map[string]int{}
				for _, k := range kinds {
					if o.kind == "" || k.Kind == o.kind {
						ks = append(ks, k.Kind)
						nodes[k.Kind] = len(k.Nodes)
					}
				}
				if o.kind != "" && len(ks) == 0 {
					ks = append(ks, o.kind) // hosted by no node now: still show its log
				}
				loads, err := logs.sample(cctx, ks)
				if err != nil {
					return topFrame{}, err
				}
				for i := range loads {
					loads[i].Nodes = nodes[loads[i].Kind]
				}
				f.Kinds = loads
				return f, nil
			}
			prev, err := sample()
			if err != nil {
				return err
			}
			if !o.once {
				a.showTop(prev, o.interval, true)
			}
			for {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(o.interval):
				}
				cur, err := sample()
				if err != nil {
					return err
				}
				rates(&cur, prev)
				if o.once {
					return a.showTop(cur, o.interval, false)
				}
				if err := a.showTop(cur, o.interval, true); err != nil {
					return err
				}
				prev = cur
			}
		},
	}
}

// rates fills cur's per-second rates from prev.
func rates(cur *topFrame, prev topFrame) {
	dt := cur.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return
	}
	old := map[string]kindLoad{}
	for _, k := range prev.Kinds {
		old[k.Kind] = k
	}
	per := func(now, before uint64) float64 {
		if now < before {
			return 0 // the log was trimmed (retention)
		}
		return float64(now-before) / dt
	}
	for i, k := range cur.Kinds {
		p, ok := old[k.Kind]
		if !ok {
			continue
		}
		cur.Kinds[i].InPerSec = per(k.Records, p.Records)
		cur.Kinds[i].DeadPerSec = per(k.Dead, p.Dead)
		cur.Kinds[i].DonePerSec = per(sat(k.Records, k.Backlog), sat(p.Records, p.Backlog))
	}
}

func sat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// showTop prints a frame; clear redraws the terminal first.
func (a *app) showTop(f topFrame, every time.Duration, clear bool) error {
	if a.g.json {
		return a.printJSON(f)
	}
	var b strings.Builder
	if clear {
		b.WriteString("\x1b[H\x1b[2J")
		fmt.Fprintf(&b, "ea top  %s  every %v (Ctrl-C to stop)\n\n", f.Time.Local().Format("15:04:05"), every)
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNODES\tRECORDS\tIN/S\tDONE/S\tBACKLOG\tDEAD\tDEAD/S\t")
	for _, k := range f.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%.1f\t\n", k.Kind, k.Nodes, k.Records, k.InPerSec, k.DonePerSec, k.Backlog, k.Dead, k.DeadPerSec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(f.Kinds) == 0 {
		b.WriteString("no kinds: no node is running (start one with make run)\n")
	}
	_, err := fmt.Fprint(a.stdout, b.String())
	return err
}

// logs are the streams ea top counts in: mailboxes (one stream, or every
// stream group's) and dead letters.
type logs struct {
	names bus.Names
	mbox  []jetstream.Stream
	dead  jetstream.Stream
}

// openLogs looks the streams up, taking the layout (partitions, stream
// groups) from what is provisioned.
func openLogs(ctx context.Context, conn *bus.Conn) (logs, error) {
	conn.Adopt(ctx)
	n := conn.Names()
	var mbox []jetstream.Stream
	for g := range n.Groups() {
		s, err := conn.MailboxStreamOf(ctx, g)
		if err != nil {
			return logs{}, withCode(exitUnavailable, fmt.Errorf("%w (was the deployment provisioned?)", err))
		}
		mbox = append(mbox, s)
	}
	dead, err := conn.JetStream().Stream(ctx, n.DeadStream())
	if err != nil {
		return logs{}, withCode(exitUnavailable, fmt.Errorf("stream %s: %w", n.DeadStream(), err))
	}
	return logs{names: n, mbox: mbox, dead: dead}, nil
}

// sample counts each kind's mailbox records, backlog and dead letters.
func (l logs) sample(ctx context.Context, kinds []string) ([]kindLoad, error) {
	n := l.names
	consumers := map[string]*jetstream.ConsumerInfo{} // partition consumers, each on its group's stream
	for _, mbox := range l.mbox {
		infos := mbox.ListConsumers(ctx)
		for ci := range infos.Info() {
			consumers[ci.Name] = ci
		}
		if err := infos.Err(); err != nil {
			return nil, fmt.Errorf("list consumers of %s: %w", mbox.CachedInfo().Config.Name, err)
		}
	}
	out := make([]kindLoad, 0, len(kinds))
	for _, kind := range kinds {
		load := kindLoad{Kind: kind}
		for _, mbox := range l.mbox {
			recs, err := countMatching(ctx, mbox, n.KindMailboxes(kind))
			if err != nil {
				return nil, err
			}
			load.Records += recs
		}
		var err error
		if load.Dead, err = countMatching(ctx, l.dead, n.Dead(records.Ref{Kind: kind, ID: "*"})); err != nil {
			return nil, err
		}
		for p := range n.Partitions() {
			if ci, ok := consumers[n.PartitionConsumer(kind, p)]; ok {
				load.Backlog += ci.NumPending + uint64(ci.NumAckPending)
			}
		}
		out = append(out, load)
	}
	return out, nil
}

// countMatching returns how many messages of stream match filter: the
// pending count of a consumer created for the purpose (the server counts
// from its subject index, reading no message) and deleted at once.
func countMatching(ctx context.Context, s jetstream.Stream, filter string) (uint64, error) {
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject: filter, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, InactiveThreshold: time.Minute, Replicas: 1,
	})
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", filter, err)
	}
	info := c.CachedInfo()
	if err := s.DeleteConsumer(context.WithoutCancel(ctx), info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, fmt.Errorf("count %s: delete consumer: %w", filter, err)
	}
	return info.NumPending, nil
}
