package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type tailOpts struct {
	follow bool
	since  string
	from   uint64
	last   int
	poll   time.Duration
}

func cmdTail() *command {
	var o tailOpts
	return &command{
		name: "tail", args: "mailbox|outbox|effector <kind>/<id> | process <id> | type <type> | dead [<kind>[/<id>]]",
		short: "print records of the log: an effector's mailbox or outbox, a process, dead letters",
		long: `Print records of the record log, oldest first, one per line, and with --follow
keep printing new ones until interrupted:

  ea tail outbox counter/c1 --follow      what counter/c1 emitted
  ea tail mailbox counter/c1 --last 50    the last 50 records sent to it
  ea tail effector counter/c1             both, merged by stored time
  ea tail process <id> --since 10m        what happened in a process (or orchestration)
  ea tail type inc --from 1               every record of type inc
  ea tail dead                            every dead letter, with its reason
  ea tail dead counter                    dead letters of one kind (or counter/c1: one effector)

Where to start: by default the last --last records (10, any number: the record
store answers 1000 at a time, so more are read in pages); --since TIME (RFC 3339,
or a duration meaning that long ago, e.g. 10m) or --from SEQ (a stream sequence:
records at or after it in their stream, as printed in the "#" column) start
there instead. Mailbox, outbox, process and type records come from the record
store (ea-node --record-store, on by default; --follow polls it every --poll);
dead letters from the dead-letter stream. --json prints each record as the
record store's JSON (dead letters add "reason", "error", "dead_seq").`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&o.follow, "follow", false, "keep printing new records until interrupted")
			fs.BoolVar(&o.follow, "f", false, "short for --follow")
			fs.StringVar(&o.since, "since", "", "start at this time: RFC 3339, or a duration ago such as 10m")
			fs.Uint64Var(&o.from, "from", 0, "start at this stream sequence")
			fs.IntVar(&o.last, "last", 10, "without --since or --from: how many of the latest records to print first (0 or more; above 1000 read in pages)")
			fs.DurationVar(&o.poll, "poll", 500*time.Millisecond, "with --follow: how often to ask the record store for new records")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if len(args) == 0 {
				return usagef(a.fs.Name(), "needs what to print: mailbox, outbox, effector, process, type or dead")
			}
			if o.last < 0 {
				return usagef(a.fs.Name(), "--last %d: want 0 or more", o.last)
			}
			if o.poll <= 0 {
				return usagef(a.fs.Name(), "--poll %v: want a positive duration", o.poll)
			}
			var since time.Time
			if o.since != "" {
				t, err := parseSince(o.since, a.now())
				if err != nil {
					return usagef(a.fs.Name(), "--since %q: %v", o.since, err)
				}
				since = t
			}
			if o.from > 0 && !since.IsZero() {
				return usagef(a.fs.Name(), "--since and --from: give one of them")
			}
			a.following = o.follow
			what, rest := args[0], args[1:]
			if what == "dead" {
				if len(rest) > 1 {
					return usagef(a.fs.Name(), "unexpected argument %q (tail dead takes at most <kind> or <kind>/<id>)", rest[1])
				}
				return a.tailDead(ctx, rest, o, since)
			}
			var q store.Query
			if len(rest) != 1 {
				return usagef(a.fs.Name(), "%s needs exactly one argument", what)
			}
			switch what {
			case "mailbox", "outbox", "effector":
				ref, err := a.ref(rest[0])
				if err != nil {
					return err
				}
				q.Effector = ref
				switch what {
				case "mailbox":
					q.Box = store.BoxMailbox
				case "outbox":
					q.Box = store.BoxOutbox
				}
			case "process":
				if rest[0] == "" {
					return usagef(a.fs.Name(), "process needs a process id")
				}
				q.Process = rest[0]
			case "type":
				if rest[0] == "" {
					return usagef(a.fs.Name(), "type needs a record type")
				}
				q.Type = rest[0]
			default:
				return usagef(a.fs.Name(), "%q: want mailbox, outbox, effector, process, type or dead", what)
			}
			return a.tailStore(ctx, q, o, since)
		},
	}
}

// parseSince reads an RFC 3339 time or a duration ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, errors.New("want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago such as 10m")
	}
	return now.Add(-d), nil
}

type recKey struct {
	stream string
	seq    uint64
}

// tailStore prints the records q selects, then follows.
func (a *app) tailStore(ctx context.Context, q store.Query, o tailOpts, since time.Time) error {
	r, err := a.storeReader(ctx)
	if err != nil {
		return err
	}
	query := func(q store.Query) (store.Page, error) {
		cctx, cancel := a.call(ctx)
		defer cancel()
		return r.Query(cctx, q)
	}
	seen := map[recKey]bool{}
	printed := false
	var newest time.Time
	show := func(rec store.Record) error {
		k := recKey{rec.Stream, rec.Seq}
		if seen[k] || (o.from > 0 && rec.Seq < o.from) {
			return nil
		}
		seen[k] = true
		printed = true
		if rec.Stored.After(newest) {
			newest = rec.Stored
		}
		return a.printRecord(rec)
	}
	if o.from == 0 && since.IsZero() {
		// The latest records: newest first, printed oldest first.
		if o.last > 0 {
			// Newest first, a page of at most store.MaxLimit at a time
			// until --last are read or the log begins.
			lq := q
			lq.Order = store.NewestFirst
			var recs []store.Record
			for len(recs) < o.last {
				lq.Limit = min(o.last-len(recs), store.MaxLimit)
				page, err := query(lq)
				if err != nil {
					return err
				}
				recs = append(recs, page.Records...)
				if !page.More || page.Cursor == "" {
					break
				}
				lq.Cursor = page.Cursor
			}
			if len(recs) > o.last {
				recs = recs[:o.last]
			}
			slices.Reverse(recs)
			for _, rec := range recs {
				if err := show(rec); err != nil {
					return err
				}
			}
		}
		if !o.follow {
			return nil
		}
		// Follow from the newest printed (its time again: records stored
		// in the same instant are told apart by seen), or from now.
		q.Since = newest
		if !printed {
			q.Since = a.now().Add(-time.Second)
		}
	} else {
		q.Since = since
	}
	q.Order, q.Limit = store.OldestFirst, store.MaxLimit
	for {
		page, err := query(q)
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			if err := show(rec); err != nil {
				return err
			}
		}
		// The cursor never yields a record twice: only the first page can
		// repeat what the latest records printed, so forget them (a long
		// follow keeps no memory of what it printed).
		clear(seen)
		if page.Cursor != "" {
			q.Cursor = page.Cursor
		}
		if page.More {
			continue
		}
		if !o.follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.poll):
		}
	}
}

// printRecord prints one record of the log.
func (a *app) printRecord(rec store.Record) error {
	if a.g.json {
		return a.printJSON(rec.JSON())
	}
	var b strings.Builder
	stored := rec.Stored
	if stored.IsZero() {
		stored = rec.Time
	}
	fmt.Fprintf(&b, "%s %-7s %s #%d %s id=%s", stored.Local().Format("15:04:05.000"), boxName(rec), rec.Effector, rec.Seq, typeOf(rec.Record), rec.ID)
	envelope(&b, rec.Record)
	if rec.Invalid != "" {
		fmt.Fprintf(&b, " invalid=%q", rec.Invalid)
	}
	fmt.Fprintf(&b, " %s", payloadText(rec.Record))
	_, err := fmt.Fprintln(a.stdout, b.String())
	return err
}

func boxName(rec store.Record) string {
	switch rec.Box {
	case store.BoxMailbox:
		return "mailbox"
	case store.BoxOutbox:
		return "outbox"
	}
	return string(rec.Box)
}

func envelope(b *strings.Builder, r records.Record) {
	if !r.From.IsZero() {
		fmt.Fprintf(b, " from=%s", r.From)
	}
	if r.Process != "" {
		fmt.Fprintf(b, " process=%s", r.Process)
	}
	if r.Cause != "" {
		fmt.Fprintf(b, " cause=%s", r.Cause)
	}
	if r.Reply != "" {
		fmt.Fprintf(b, " reply=%s", r.Reply)
	}
	if r.Priority != records.PriorityNormal {
		fmt.Fprintf(b, " priority=%s", r.Priority)
	}
}

// payloadText renders a payload as compact JSON when it decodes, else its
// size.
func payloadText(r records.Record) string {
	if len(r.Payload) == 0 {
		return "null"
	}
	var v any
	if err := r.Decode(&v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			s := string(b)
			if len(s) > 400 {
				s = s[:397] + "..."
			}
			return s
		}
	}
	return fmt.Sprintf("<%d bytes %s>", len(r.Payload), r.ContentType)
}

// deadJSON is a dead letter in --json output.
type deadJSON struct {
	store.RecordJSON
	Reason    string   `json:"reason"`
	Error     string   `json:"error,omitempty"`
	DeadSeq   uint64   `json:"dead_seq"`
	Truncated []string `json:"truncated,omitempty"`
}

// tailDead prints dead letters of one effector, one kind or all, from the
// dead-letter stream through an ordered consumer.
func (a *app) tailDead(ctx context.Context, args []string, o tailOpts, since time.Time) error {
	conn, err := a.connect(ctx)
	if err != nil {
		return err
	}
	n := conn.Names()
	filter := n.Dead(records.Ref{Kind: "*", ID: "*"})
	if len(args) == 1 {
		if strings.Contains(args[0], "/") {
			ref, err := a.ref(args[0])
			if err != nil {
				return err
			}
			filter = n.Dead(ref)
		} else {
			if err := records.ValidateKind(args[0]); err != nil {
				return usagef(a.fs.Name(), "kind %q: %v", args[0], err)
			}
			filter = n.Dead(records.Ref{Kind: args[0], ID: "*"})
		}
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	ring := 0 // keep only the last o.last before the end (default start)
	switch {
	case o.from > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, o.from
	case !since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	default:
		ring = o.last
	}
	cctx, cancel := a.call(ctx)
	cons, err := conn.JetStream().OrderedConsumer(cctx, n.DeadStream(), cfg)
	cancel()
	if err != nil {
		return withCode(exitUnavailable, fmt.Errorf("dead letters (stream %s): %w", n.DeadStream(), err))
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()

	// Caught up: the consumer had nothing to deliver from the start, or the
	// last message delivered had nothing pending after it.
	cctx, cancel = a.call(ctx)
	info, err := cons.Info(cctx)
	cancel()
	caughtUp := err == nil && info.NumPending == 0 && info.Delivered.Stream == 0 && info.NumAckPending == 0
	// By default the last --last dead letters are kept in a ring until
	// the consumer has caught up, then printed; with --from or --since
	// every one is printed as it comes.
	ringMode := ring >= 0 && o.from == 0 && since.IsZero()
	var buf []deadJSON
	for {
		if caughtUp && ringMode {
			for _, d := range buf {
				if err := a.printDead(d); err != nil {
					return err
				}
			}
			buf, ringMode = nil, false
		}
		if caughtUp && !o.follow {
			return nil
		}
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("dead letters: %w", err)
		}
		d := deadOf(deadMsgOf(msg))
		if meta, err := msg.Metadata(); err == nil && meta.NumPending == 0 {
			caughtUp = true
		}
		if !ringMode {
			if err := a.printDead(d); err != nil {
				return err
			}
			continue
		}
		if ring > 0 {
			buf = append(buf, d)
			if len(buf) > ring {
				buf = buf[1:]
			}
		}
	}
}

// deadMsg is a message of the dead letter stream.
type deadMsg struct {
	subject string
	header  nats.Header
	data    []byte
	seq     uint64    // in the dead letter stream; 0 when unknown
	stored  time.Time // when the stream stored it
}

// deadMsgOf reads a message a consumer delivered.
func deadMsgOf(msg jetstream.Msg) deadMsg {
	d := deadMsg{subject: msg.Subject(), header: msg.Headers(), data: msg.Data()}
	if meta, err := msg.Metadata(); err == nil {
		d.seq, d.stored = meta.Sequence.Stream, meta.Timestamp
	}
	return d
}

// deadOf reads a dead letter.
func deadOf(msg deadMsg) deadJSON {
	h := msg.header
	var d deadJSON
	rec, err := records.FromMsg(h.Get(records.HeaderSubject), h, msg.data)
	sr := store.Record{Record: rec}
	if err != nil {
		sr.Invalid = err.Error()
		sr.Record = records.Record{ID: h.Get(records.HeaderID), Payload: msg.data}
	}
	sr.Subject = h.Get(records.HeaderSubject)
	sr.Seq, _ = strconv.ParseUint(h.Get(records.HeaderSeq), 10, 64)
	sr.Stream = h.Get(records.HeaderStream)
	sr.Box = store.BoxMailbox
	d.DeadSeq, sr.Stored = msg.seq, msg.stored
	if parts := strings.Split(msg.subject, "."); len(parts) >= 2 {
		sr.Effector = records.Ref{Kind: parts[len(parts)-2], ID: parts[len(parts)-1]}
	}
	d.RecordJSON = sr.JSON()
	d.Reason = h.Get(records.HeaderDeadReason)
	d.Error = h.Get(records.HeaderError)
	if t := h.Get(records.HeaderTruncated); t != "" {
		d.Truncated = strings.Split(t, ",")
	}
	return d
}

func (a *app) printDead(d deadJSON) error {
	if a.g.json {
		return a.printJSON(d)
	}
	var b strings.Builder
	t := d.Stored
	fmt.Fprintf(&b, "%s dead    %s #%d %s id=%s reason=%s", t.Local().Format("15:04:05.000"), d.Effector, d.DeadSeq, firstNonEmpty(d.Type, records.DefaultType), d.ID, d.Reason)
	if d.Error != "" {
		fmt.Fprintf(&b, " error=%q", d.Error)
	}
	if d.Seq > 0 {
		fmt.Fprintf(&b, " original=%s#%d", d.Stream, d.Seq)
	}
	if len(d.Truncated) > 0 {
		fmt.Fprintf(&b, " truncated=%s", strings.Join(d.Truncated, ","))
	}
	_, err := fmt.Fprintln(a.stdout, b.String())
	return err
}
