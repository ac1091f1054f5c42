package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// emit is how a subscription hands a frame to its connection; an error
// means the connection is ending.
type emit func(typ string, v any) error

// topicRun runs one subscription until ctx ends (nil) or it fails.
type topicRun func(ctx context.Context, out emit) error

// topicCheck is the part of a subscription's validation that asks NATS
// (who owns the effector or orchestration, whether a cursor is good); it
// returns an error frame's code and error.
type topicCheck func(ctx context.Context) (string, error)

// subscribe starts a subscription after validating it, answering
// "subscribed" (or an error frame). Errors come in this order, the first
// that applies winning: the frame (bad_request), the name
// (duplicate_subscription), the cap (too_many_subscriptions), then what
// needs a look-up: ownership (forbidden, not_found) and a records cursor
// (bad_request).
func (s *session) subscribe(h head, f SubscribeFrame) {
	if f.Sub == "" {
		s.errorFrame(h, CodeBadRequest, "subscribe frame: missing \"sub\": name the subscription (unsubscribe and its frames use the name)")
		return
	}
	plan, err := s.topic(f)
	if err != nil {
		s.errorFrame(h, CodeBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	_, dup := s.subs[f.Sub]
	full := len(s.subs) >= s.g.cfg.MaxSubscriptions
	s.mu.Unlock()
	switch {
	case dup:
		s.errorFrame(h, CodeDuplicateSub, fmt.Sprintf("subscription %q exists: unsubscribe it first or use another name", f.Sub))
		return
	case full:
		s.errorFrame(h, CodeTooManySubs, fmt.Sprintf("at most %d subscriptions per connection: unsubscribe one first", s.g.cfg.MaxSubscriptions))
		return
	}
	if plan.check != nil {
		cctx, cancel := context.WithTimeout(s.ctx, s.g.cfg.RequestTimeout)
		code, err := plan.check(cctx)
		cancel()
		if err != nil {
			s.errorFrame(h, code, err.Error())
			return
		}
	}
	// Frames are handled one at a time by the handler's goroutine, and a
	// subscription that ends on its own only removes itself: the name is
	// still free and the count no higher than checked above.
	s.mu.Lock()
	if s.subs == nil {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.subs[f.Sub] = cancel
	s.g.metrics.subscriptions.Inc()
	s.wg.Add(1)
	s.mu.Unlock()
	// "subscribed" goes out before the subscription's first frame.
	subscribed := SubscribedFrame{Type: TypeSubscribed, Req: h.Req, Sub: f.Sub}
	if plan.positions != nil {
		subscribed.Positions = plan.positions()
	}
	if s.send(TypeSubscribed, subscribed) != nil {
		cancel()
		s.wg.Done()
		return
	}
	go func() {
		defer s.wg.Done()
		out := func(typ string, v any) error { return s.send(typ, v) }
		err := plan.run(ctx, out)
		ended := ctx.Err() != nil
		cancel()
		s.mu.Lock()
		mine := s.subs != nil && !ended
		if mine {
			delete(s.subs, f.Sub)
			s.g.metrics.subscriptions.Dec()
		}
		s.mu.Unlock()
		if mine && s.ctx.Err() == nil {
			msg := "subscription ended"
			if err != nil {
				msg = err.Error()
			}
			s.errorFrame(head{Sub: f.Sub}, CodeSubscriptionEnd, msg)
			_ = s.send(TypeUnsubscribed, unsubscribedFrame{Type: TypeUnsubscribed, Sub: f.Sub, Reason: msg})
		}
	}()
}

type unsubscribedFrame struct {
	Type   string `json:"type"`
	Req    string `json:"req,omitempty"`
	Sub    string `json:"sub"`
	Reason string `json:"reason,omitempty"`
}

func (s *session) unsubscribe(h head) {
	s.mu.Lock()
	cancel, ok := s.subs[h.Sub]
	if ok {
		delete(s.subs, h.Sub)
		s.g.metrics.subscriptions.Dec()
	}
	s.mu.Unlock()
	if !ok {
		s.errorFrame(h, CodeUnknownSub, fmt.Sprintf("no subscription %q on this connection", h.Sub))
		return
	}
	cancel()
	_ = s.send(TypeUnsubscribed, unsubscribedFrame{Type: TypeUnsubscribed, Req: h.Req, Sub: h.Sub})
}

// topic validates f and returns what runs it, and what checks it needing
// a look-up (nil: none).
func (s *session) topic(f SubscribeFrame) (topicPlan, error) {
	g := s.g
	n := g.names
	var ref records.Ref
	if f.Effector != "" {
		r, err := records.ParseRef(f.Effector)
		if err != nil {
			return topicPlan{}, fmt.Errorf("effector: %w (want \"<kind>/<id>\")", err)
		}
		ref = r
	}
	if f.Kind != "" {
		if err := records.ValidateKind(f.Kind); err != nil {
			return topicPlan{}, fmt.Errorf("kind: %w", err)
		}
	}
	// A user's subscriptions show only what carries its name; one of an
	// effector's needs the effector to be its own.
	id := s.identity()
	var ownEffector topicCheck
	if !ref.IsZero() && !id.Admin() {
		ownEffector = func(ctx context.Context) (string, error) {
			_, code, err := s.ownEffector(ctx, ref)
			return code, err
		}
	}
	only := func(allowed ...string) error {
		set := map[string]bool{"effector": f.Effector != "", "kind": f.Kind != "", "process": f.Process != "",
			"id": f.ID != "", "from": f.From != 0, "cursor": f.Cursor != "", "positions": f.Positions != nil}
		for _, a := range allowed {
			delete(set, a)
		}
		for k, v := range set {
			if v {
				return fmt.Errorf("topic %s does not take %q (it takes %s)", f.Topic, k, strings.Join(allowed, ", "))
			}
		}
		return nil
	}
	sub := f.Sub
	switch f.Topic {
	case TopicOutbox, TopicMailbox:
		if f.Topic == TopicMailbox {
			if err := only("effector", "from"); err != nil {
				return topicPlan{}, err
			}
			if ref.IsZero() {
				return topicPlan{}, errors.New("topic mailbox needs \"effector\": \"<kind>/<id>\"")
			}
			stream := n.MailboxStreamFor(ref)
			from := s.startAt(stream, f.From)
			return topicPlan{run: s.follow(sub, stream, n.StoredMailbox(ref), &from.seq, store.BoxMailbox), check: chain(ownEffector, from.resolve)}, nil
		}
		if err := only("effector", "kind", "from", "positions"); err != nil {
			return topicPlan{}, err
		}
		switch {
		case !ref.IsZero() && f.Kind != "":
			return topicPlan{}, errors.New("topic outbox: give \"effector\" or \"kind\", not both")
		case !ref.IsZero() && f.Positions != nil:
			return topicPlan{}, errors.New("topic outbox takes \"positions\" with \"kind\" only: one effector's outbox is one stream, resume it with \"from\"")
		case !ref.IsZero():
			stream := n.OutboxStreamFor(ref)
			from := s.startAt(stream, f.From)
			return topicPlan{run: s.follow(sub, stream, n.Outbox(ref), &from.seq, store.BoxOutbox), check: chain(ownEffector, from.resolve)}, nil
		case f.Kind != "":
			return s.kindOutbox(f)
		}
		return topicPlan{}, errors.New("topic outbox needs \"effector\": \"<kind>/<id>\" or \"kind\"")
	case TopicDead:
		if err := only("effector", "from"); err != nil {
			return topicPlan{}, err
		}
		filter := ""
		if !ref.IsZero() {
			filter = n.Dead(ref)
		}
		from := s.startAt(n.DeadStream(), f.From)
		return topicPlan{run: s.followDead(sub, filter, &from.seq), check: chain(ownEffector, from.resolve)}, nil
	case TopicState:
		if err := only("effector", "kind", "from", "positions"); err != nil {
			return topicPlan{}, err
		}
		o := store.WatchOptions{Kind: f.Kind, From: f.From, Positions: f.Positions}
		switch {
		case !ref.IsZero() && f.Kind != "":
			return topicPlan{}, errors.New("topic state: give \"effector\" or \"kind\", not both")
		case !ref.IsZero() && f.Positions != nil:
			return topicPlan{}, errors.New("topic state takes \"positions\" with \"kind\" only: one effector's state is in one bucket, resume it with \"from\"")
		case !ref.IsZero():
			o.Kind, o.ID = ref.Kind, ref.ID
		case f.Kind == "":
			return topicPlan{}, errors.New("topic state needs \"effector\": \"<kind>/<id>\" or \"kind\"")
		case f.Positions != nil && f.From != 0:
			return topicPlan{}, errors.New("topic state: give \"from\" or \"positions\", not both")
		case n.Groups() > 1 && f.From != 0:
			return topicPlan{}, fmt.Errorf("topic state with \"kind\" and \"from\": a revision of one state bucket, and this deployment has %d stream groups, each with a state bucket: resume with \"positions\" ({\"<bucket>\": revision}: the last \"revision\" received from each \"bucket\" + 1), subscribe without \"from\" (the current documents, then changes), or to each effector", n.Groups())
		case f.Positions != nil:
			if err := f.Positions.Check(n.StateBuckets()); err != nil {
				return topicPlan{}, fmt.Errorf("positions: %w: give the \"bucket\" and \"revision\" + 1 of state frames of this deployment", err)
			}
		}
		return topicPlan{run: s.watchState(sub, o), check: ownEffector}, nil
	case TopicRecords:
		if err := only("effector", "process", "cursor"); err != nil {
			return topicPlan{}, err
		}
		q := store.Query{Effector: ref, Process: f.Process, Cursor: f.Cursor, Limit: 100}
		if ref.IsZero() == (f.Process == "") {
			return topicPlan{}, errors.New("topic records needs \"effector\": \"<kind>/<id>\" or \"process\" (one of them)")
		}
		if !id.Admin() {
			q.Owner = id.Name // the owner index
		}
		check := func(ctx context.Context) (string, error) {
			if ownEffector != nil {
				if code, err := ownEffector(ctx); err != nil {
					return code, err
				}
			}
			return s.checkCursor(ctx, q)
		}
		return topicPlan{run: s.pollRecords(sub, q), check: check}, nil
	case TopicOrchestration:
		if err := only("id", "from"); err != nil {
			return topicPlan{}, err
		}
		key := "*"
		var check topicCheck
		if f.ID != "" {
			if err := records.ValidateID(f.ID); err != nil {
				return topicPlan{}, fmt.Errorf("id: %w", err)
			}
			key = f.ID
			check = func(ctx context.Context) (string, error) { return s.ownOrchestration(ctx, f.ID) }
		}
		return topicPlan{run: s.watchOrch(sub, key, f.From), check: check}, nil
	case "":
		return topicPlan{}, errors.New("subscribe frame: missing \"topic\": outbox, mailbox, state, records, dead or orchestration")
	}
	return topicPlan{}, fmt.Errorf("unknown topic %q: outbox, mailbox, state, records, dead or orchestration", truncate(f.Topic, 64))
}

// topicPlan is a validated subscription: what runs it, what checks it
// needing a look-up (nil: none), and the positions its subscribed frame
// announces (nil: none; called after check).
type topicPlan struct {
	run       topicRun
	check     topicCheck
	positions func() actor.Positions
}

// kindOutbox plans an outbox subscription of every effector of f.Kind:
// every outbox stream at once (one with one stream group), each from its
// start: its entry of f.Positions (a stream it does not name from its
// first record), f.From (one stream only), or now. The subscribed frame
// names where each stream starts.
func (s *session) kindOutbox(f SubscribeFrame) (topicPlan, error) {
	n := s.g.names
	streams := n.OutboxStreams()
	switch {
	case f.Positions != nil && f.From != 0:
		return topicPlan{}, errors.New("topic outbox: give \"from\" or \"positions\", not both")
	case f.From != 0 && len(streams) > 1:
		return topicPlan{}, fmt.Errorf("topic outbox with \"kind\" and \"from\": a sequence of one stream, and this deployment has %d stream groups, each with an outbox stream: resume with \"positions\" ({\"<stream>\": seq}: the last \"seq\" received from each \"stream\" + 1), subscribe without \"from\", or to each effector (\"effector\")", len(streams))
	case f.Positions != nil:
		if err := f.Positions.Check(streams); err != nil {
			return topicPlan{}, fmt.Errorf("positions: %w: give the \"stream\" and \"seq\" + 1 of record frames of this deployment, or the positions of its subscribed frame", err)
		}
	}
	starts := make([]*start, len(streams))
	runs := make([]topicRun, len(streams))
	checks := make([]topicCheck, len(streams))
	for i, stream := range streams {
		from := f.From
		if f.Positions != nil {
			from = f.Positions.At(stream)
		}
		starts[i] = s.startAt(stream, from)
		runs[i] = s.follow(f.Sub, stream, n.KindOutboxes(f.Kind), &starts[i].seq, store.BoxOutbox)
		checks[i] = starts[i].resolve
	}
	positions := func() actor.Positions {
		p := actor.Positions{}
		for _, st := range starts {
			p[st.stream] = st.seq
		}
		return p
	}
	return topicPlan{run: together(runs), check: chain(checks...), positions: positions}, nil
}

// chain runs checks in order, the first failure winning (nil ones are
// skipped).
func chain(checks ...topicCheck) topicCheck {
	return func(ctx context.Context) (string, error) {
		for _, c := range checks {
			if c == nil {
				continue
			}
			if code, err := c(ctx); err != nil {
				return code, err
			}
		}
		return "", nil
	}
}

// together runs runs at once as one subscription (one topic over several
// streams): it ends when any of them ends, returning the first error.
func together(runs []topicRun) topicRun {
	if len(runs) == 1 {
		return runs[0]
	}
	return func(ctx context.Context, out emit) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errs := make(chan error, len(runs))
		for _, run := range runs {
			go func() { errs <- run(ctx, out) }()
		}
		var first error
		for range runs {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
			cancel() // one ended (the connection, or its stream failed): end the others
		}
		return first
	}
}

// start is where a stream subscription starts: seq, or "now" (0), which
// resolve turns into the stream's last sequence + 1 before "subscribed" is
// sent, so that everything stored after that frame is delivered.
type start struct {
	s   *session
	seq uint64
	// stream to ask for its last sequence.
	stream string
}

func (s *session) startAt(stream string, from uint64) *start {
	return &start{s: s, seq: from, stream: stream}
}

func (st *start) resolve(ctx context.Context) (string, error) {
	if st.seq != 0 {
		return "", nil
	}
	str, err := st.s.g.conn.JetStream().Stream(ctx, st.stream)
	if err != nil {
		return CodeUnavailable, fmt.Errorf("stream %s: %w", st.stream, err)
	}
	st.seq = str.CachedInfo().State.LastSeq + 1
	return "", nil
}

// checkCursor refuses a records subscription whose cursor the store does
// not take (bad_request), by asking for its first page; any other failure
// is left to the subscription, which retries.
func (s *session) checkCursor(ctx context.Context, q store.Query) (string, error) {
	if q.Cursor == "" {
		return "", nil
	}
	q.Limit = 1
	if _, err := s.g.store.Query(ctx, q); err != nil && (errors.Is(err, store.ErrBadCursor) || errors.Is(err, store.ErrInvalid)) {
		return CodeBadRequest, fmt.Errorf("cursor: %w (resume with the cursor of the last records frame of the same subscription)", err)
	}
	return "", nil
}

// consume runs an ordered consumer on stream (filtered on filter, all of
// it when empty) from sequence from (0: new messages only), handing each
// message to fn, until ctx ends or fn fails.
func (g *Gateway) consume(ctx context.Context, stream, filter string, from uint64, fn func(jetstream.Msg) error) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if filter != "" {
		cfg.FilterSubjects = []string{filter}
	}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := g.conn.JetStream().OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("follow %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("follow %s: %w", stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("follow %s: %w", stream, err)
		}
		if err := fn(msg); err != nil {
			return nil // the connection is ending
		}
	}
}

// recordJSON renders a mailbox or outbox message as the record store does.
func (g *Gateway) recordJSON(msg jetstream.Msg, box store.Box) (store.RecordJSON, uint64) {
	r := store.Record{Stream: msg.Headers().Get("Nats-Stream"), Box: box}
	var seq uint64
	if meta, err := msg.Metadata(); err == nil {
		seq, r.Stored, r.Stream = meta.Sequence.Stream, meta.Timestamp, meta.Stream
	}
	subject := msg.Subject()
	ref, _ := g.names.RefOf(subject)
	if box == store.BoxMailbox && !ref.IsZero() {
		subject = g.names.Mailbox(ref)
	}
	rec, err := records.FromMsg(subject, msg.Headers(), msg.Data())
	if err != nil {
		rec = records.Record{ID: msg.Headers().Get(records.HeaderID), Payload: msg.Data()}
		r.Invalid = err.Error()
	}
	rec.Subject, rec.Stream, rec.Seq = subject, r.Stream, seq
	r.Record, r.Effector = rec, ref
	return r.JSON(), seq
}

func (s *session) follow(sub, stream, filter string, from *uint64, box store.Box) topicRun {
	return func(ctx context.Context, out emit) error {
		return s.g.consume(ctx, stream, filter, *from, func(msg jetstream.Msg) error {
			if !s.sees(msg.Headers().Get(records.HeaderOwner)) {
				return nil
			}
			rec, seq := s.g.recordJSON(msg, box)
			return out(TypeRecord, RecordFrame{Type: TypeRecord, Sub: sub, Stream: stream, Seq: seq, Record: rec})
		})
	}
}

func (s *session) followDead(sub, filter string, from *uint64) topicRun {
	return func(ctx context.Context, out emit) error {
		return s.g.consume(ctx, s.g.names.DeadStream(), filter, *from, func(msg jetstream.Msg) error {
			h := msg.Headers()
			if !s.sees(h.Get(records.HeaderOwner)) {
				return nil // another user's record (or one whose EA-Owner did not fit in the dead letter)
			}
			var seq uint64
			var stored time.Time
			if meta, err := msg.Metadata(); err == nil {
				seq, stored = meta.Sequence.Stream, meta.Timestamp
			}
			f := DeadFrame{Type: TypeDead, Sub: sub, DeadLetter: s.g.deadLetterJSON(msg.Subject(), h, msg.Data(), seq, stored)}
			return out(TypeDead, f)
		})
	}
}

func (s *session) watchState(sub string, o store.WatchOptions) topicRun {
	return func(ctx context.Context, out emit) error {
		w, err := s.g.store.Watch(ctx, o)
		if err != nil {
			return err
		}
		defer w.Stop()
		for ev := range w.Events() {
			if !s.sees(ev.Document.Owner) && (o.ID == "" || !ev.Deleted) {
				continue // another user's effector (of a kind watch)
			}
			f := StateFrame{Type: TypeState, Sub: sub, Bucket: ev.Bucket, Revision: ev.Revision, Effector: ev.Effector.String(), Deleted: ev.Deleted}
			if !ev.Deleted {
				doc, err := json.Marshal(ev.Document)
				if err != nil {
					return fmt.Errorf("state of %s at revision %d: %w", ev.Effector, ev.Revision, err)
				}
				f.Document = doc
			}
			if out(TypeState, f) != nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if err := w.Err(); err != nil {
			return err
		}
		return errors.New("state watch ended")
	}
}

// pollRecords pages through a store query (history first), then polls it
// every PollInterval; each page goes out as one frame with the cursor
// after it, so a client resuming with that cursor misses nothing and gets
// nothing twice.
func (s *session) pollRecords(sub string, q store.Query) topicRun {
	return func(ctx context.Context, out emit) error {
		live := false
		for {
			page, err := s.g.store.Query(ctx, q)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if errors.Is(err, store.ErrBadCursor) || errors.Is(err, store.ErrInvalid) {
					return err
				}
				s.log.Warn("gateway: records query", "err", err)
			} else {
				caughtUp := !page.More
				if len(page.Records) > 0 || (caughtUp && !live) {
					f := RecordsFrame{Type: TypeRecords, Sub: sub, Records: make([]store.RecordJSON, 0, len(page.Records)), Cursor: page.Cursor, Live: caughtUp}
					for _, r := range page.Records {
						f.Records = append(f.Records, r.JSON())
					}
					if out(TypeRecords, f) != nil {
						return nil
					}
				}
				live = live || caughtUp
				if page.Cursor != "" {
					q.Cursor = page.Cursor
				}
				if page.More {
					continue
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(s.g.cfg.PollInterval):
			}
		}
	}
}

func (s *session) watchOrch(sub, key string, from uint64) topicRun {
	return func(ctx context.Context, out emit) error {
		bucket, err := s.g.conn.JetStream().KeyValue(ctx, s.g.names.OrchBucket())
		if err != nil {
			return fmt.Errorf("%s: %w", s.g.names.OrchBucket(), err)
		}
		var opts []jetstream.WatchOpt
		if from > 0 {
			opts = append(opts, jetstream.ResumeFromRevision(from))
		}
		w, err := bucket.Watch(ctx, key, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w", s.g.names.OrchBucket(), err)
		}
		defer func() { _ = w.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			select {
			case <-ctx.Done():
				return nil
			case entry, ok := <-w.Updates():
				if !ok {
					if ctx.Err() != nil {
						return nil
					}
					return errors.New("orchestration watch ended")
				}
				e = entry
			}
			if e == nil {
				continue // the current values are delivered
			}
			f := OrchestrationFrame{Type: TypeOrchestration, Sub: sub, Revision: e.Revision(), ID: e.Key()}
			if e.Operation() != jetstream.KeyValuePut {
				if key == "*" && !s.identity().Admin() {
					continue // whose it was is gone with it
				}
				f.Deleted = true
			} else {
				o, err := supervisor.DecodeOrchestration(e.Value())
				if err != nil {
					s.log.Debug("gateway: not an orchestration record", "key", e.Key(), "err", err)
					continue
				}
				if !s.sees(o.Owner) {
					continue
				}
				f.Orchestration = &o
			}
			if out(TypeOrchestration, f) != nil {
				return nil
			}
		}
	}
}
