package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Client creates, terminates, inspects and talks to effectors from any
// process; it needs no kind of its own. It is safe for concurrent use.
type Client struct {
	conn   *bus.Conn
	names  bus.Names
	states *states
	known  liveSet
	// replies decides which EA-Reply a record sent may carry: any subject
	// but the server's APIs ($-prefixed) and the runtime's own subjects
	// other than mailboxes ([bus.Routes]); the node's allow-list decides
	// the rest.
	replies bus.Routes
}

// liveSet remembers the effectors a Client saw alive, so that Send reads
// their state document once, not before every publish. It holds at most
// maxKnown effectors (it is emptied when full).
type liveSet struct {
	mu   sync.Mutex
	refs map[records.Ref]struct{}
}

const maxKnown = 1 << 14

func (l *liveSet) live(r records.Ref) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.refs[r]
	return ok
}

func (l *liveSet) add(r records.Ref) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == nil || len(l.refs) >= maxKnown {
		l.refs = map[records.Ref]struct{}{}
	}
	l.refs[r] = struct{}{}
}

func (l *liveSet) forget(r records.Ref) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.refs, r)
}

// NewClient returns a client on conn, which must be provisioned.
func NewClient(ctx context.Context, conn *bus.Conn) (*Client, error) {
	if conn == nil {
		return nil, invalidf("NewClient: conn is nil")
	}
	buckets, err := stateBuckets(ctx, conn)
	if err != nil {
		return nil, err
	}
	replies, err := conn.Names().Routes([]string{">"})
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, names: conn.Names(), states: newStates(buckets, conn.Names()), replies: replies}, nil
}

// Create creates effector ref with the given initial state (any value that
// encodes as JSON matching the kind's state type; nil for the kind's Initial)
// through a node hosting ref.Kind, which starts driving it. It fails with
// ErrExists when ref exists (even terminated), ErrNoHost when no running node
// hosts the kind, and ErrInvalid for a bad id or a state that does not fit.
func (c *Client) Create(ctx context.Context, ref records.Ref, state any) (Document, error) {
	return c.CreateOwned(ctx, ref, state, "")
}

// CreateOwned is [Client.Create] of an effector that belongs to owner (a
// user or tenant id; see [Document.Owner]); lists and queries of the record
// store filter by it.
func (c *Client) CreateOwned(ctx context.Context, ref records.Ref, state any, owner string) (Document, error) {
	if err := ref.Validate(); err != nil {
		return Document{}, fmt.Errorf("create %s: %w: %w", ref, ErrInvalid, err)
	}
	if owner != "" {
		if err := records.ValidateOwner(owner); err != nil {
			return Document{}, fmt.Errorf("create %s: %w: %w", ref, ErrInvalid, err)
		}
	}
	req := CreateRequest{ID: ref.ID, Owner: owner}
	if state != nil {
		b, err := json.Marshal(state)
		if err != nil {
			return Document{}, fmt.Errorf("create %s: %w: state does not encode as JSON: %w", ref, ErrInvalid, err)
		}
		req.State = b
	}
	doc, err := c.control(ctx, opCreate, ref, req)
	if err == nil {
		c.known.add(ref) // Send need not read what was just created
	}
	return doc, err
}

// Terminate terminates effector ref: it processes no more records and Send
// to it fails with ErrTerminated. Terminating twice is not an error. A record
// in hand when it is terminated may have published its outputs.
func (c *Client) Terminate(ctx context.Context, ref records.Ref) (Document, error) {
	if err := ref.Validate(); err != nil {
		return Document{}, fmt.Errorf("terminate %s: %w: %w", ref, ErrInvalid, err)
	}
	return c.control(ctx, opTerminate, ref, TerminateRequest{ID: ref.ID})
}

// Reset replaces the state document of effector ref with a valid one,
// IDLE with state (any value that encodes as JSON matching the kind's state
// type; nil for the kind's Initial): the repair of a corrupt document
// ([ErrCorruptState]). The cursor is kept when the old document decodes;
// otherwise records already in ref's mailbox are taken as applied (those
// refused meanwhile are in dead letters, reason corrupt_state). It fails with
// ErrNotFound when ref was never created, ErrTerminated when it is
// terminated, ErrNoHost and ErrInvalid as Create does.
func (c *Client) Reset(ctx context.Context, ref records.Ref, state any) (Document, error) {
	if err := ref.Validate(); err != nil {
		return Document{}, fmt.Errorf("reset %s: %w: %w", ref, ErrInvalid, err)
	}
	req := ResetRequest{ID: ref.ID}
	if state != nil {
		b, err := json.Marshal(state)
		if err != nil {
			return Document{}, fmt.Errorf("reset %s: %w: state does not encode as JSON: %w", ref, ErrInvalid, err)
		}
		req.State = b
	}
	return c.control(ctx, opReset, ref, req)
}

// Activate loads effector ref into the node that reads its partition, ahead
// of traffic: its next record finds its state document in memory. It
// returns the document as loaded. It stays loaded until idle for the node's
// IdleTimeout. It fails with ErrNotFound when ref was never created,
// ErrTerminated when it is terminated, ErrNoHost when no node hosts the
// kind, and ErrNotLoaded while its partition changes hands (retry).
func (c *Client) Activate(ctx context.Context, ref records.Ref) (Document, error) {
	if err := ref.Validate(); err != nil {
		return Document{}, fmt.Errorf("activate %s: %w: %w", ref, ErrInvalid, err)
	}
	return c.control(ctx, opActivate, ref, IDRequest{ID: ref.ID})
}

func (c *Client) control(ctx context.Context, op string, ref records.Ref, req any) (Document, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Document{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	switch op {
	case opTerminate, opReset:
		c.known.forget(ref) // whatever the outcome: read it again before sending
	}
	msg, err := c.conn.NATS().RequestWithContext(ctx, c.names.Control(op, ref.Kind), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return Document{}, fmt.Errorf("%s %s: %w: no node is running (start ea-node)", op, ref, ErrNoHost)
	}
	if err != nil {
		return Document{}, fmt.Errorf("%s %s: %w", op, ref, err)
	}
	if se := service.ErrorOf(msg); se != nil {
		return Document{}, fmt.Errorf("%s %s: %w", op, ref, &ControlError{Code: se.Code, Reason: se.Reason, Message: se.Message})
	}
	var doc Document
	if err := json.Unmarshal(msg.Data, &doc); err != nil {
		return Document{}, fmt.Errorf("%s %s: bad reply: %w", op, ref, err)
	}
	return doc, nil
}

// State returns the state document of ref: ErrNotFound if it was never
// created.
func (c *Client) State(ctx context.Context, ref records.Ref) (Document, error) {
	if err := ref.Validate(); err != nil {
		return Document{}, fmt.Errorf("state of %s: %w: %w", ref, ErrInvalid, err)
	}
	doc, err := c.document(ctx, ref)
	if err != nil {
		return Document{}, fmt.Errorf("state of %s: %w", ref, err)
	}
	return doc, nil
}

// document reads the state document of a valid ref.
func (c *Client) document(ctx context.Context, ref records.Ref) (Document, error) {
	ent, err := c.states.Get(ctx, c.names.StateKey(ref))
	if errors.Is(err, kv.ErrNotFound) {
		return Document{}, ErrNotFound
	}
	return ent.Value, err
}

// Send publishes rec to the mailbox of ref and returns it as stored (id,
// time, subject and stream sequence filled in). The record is durable when
// Send returns. It fails with ErrInvalid when rec is malformed, with
// ErrForbidden when its Reply is a subject records may never be sent to (a
// $-prefixed server API, or a runtime subject other than a mailbox: the
// node would dead-letter it, reason reply_forbidden), and with
// ErrNotFound or ErrTerminated when ref cannot receive, as far as this
// client knows: it reads ref's state document only on its first send to ref
// (none when it created ref; again after Terminate or Reset through it), so
// later sends cost one publish. A record sent to an effector terminated meanwhile by someone
// else goes to its dead letters (reason terminated), as any record does.
// A record without TraceParent gets the span of ctx, when ctx has one
// (see package tracing), so it continues the caller's trace.
func (c *Client) Send(ctx context.Context, ref records.Ref, rec records.Record) (records.Record, error) {
	if err := ref.Validate(); err != nil {
		return rec, fmt.Errorf("send to %s: %w: %w", ref, ErrInvalid, err)
	}
	if rec.ID == "" {
		rec.ID = records.NewID()
	}
	if rec.Type == "" {
		rec.Type = records.DefaultType
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	if rec.TraceParent == "" {
		tracectx.Inject(ctx, &rec) // a caller's span: the record continues its trace
	}
	if err := rec.Validate(); err != nil {
		return rec, fmt.Errorf("send to %s: %w: %w", ref, ErrInvalid, err)
	}
	if rec.Reply != "" {
		if _, err := c.replies.Check(records.Ref{}, rec.Reply); err != nil {
			return rec, fmt.Errorf("send to %s: %s: %w", ref, records.HeaderReply, err)
		}
	}
	if !c.known.live(ref) {
		doc, err := c.document(ctx, ref)
		if err != nil {
			return rec, fmt.Errorf("send to %s: %w", ref, err)
		}
		if doc.Status == StatusTerminated {
			return rec, fmt.Errorf("send to %s: %w", ref, ErrTerminated)
		}
		c.known.add(ref)
	}
	rec.Subject = c.names.Mailbox(ref)
	ack, err := c.conn.JetStream().PublishMsg(ctx, rec.Msg(rec.Subject))
	if err != nil {
		return rec, fmt.Errorf("send to %s: %w", ref, err)
	}
	rec.Seq = ack.Sequence
	return rec, nil
}

// SubscribeOption chooses where a subscription starts: [FromStart],
// [FromSeq] or [FromPositions]; without one, a subscription starts with the
// next record.
type SubscribeOption func(*subscribeFrom)

// subscribeFrom is where a subscription starts: at seq (1 or more), at the
// first record (all), at each stream's position (positions, non-nil), or
// else at the next record.
type subscribeFrom struct {
	all       bool
	seq       uint64
	positions Positions
}

// FromStart replays everything the effector emitted, then follows.
func FromStart() SubscribeOption {
	return func(f *subscribeFrom) { *f = subscribeFrom{all: true} }
}

// FromSeq starts at stream sequence seq; 0 is the same as [FromStart]. A
// sequence past the last record starts with the next record stored there.
// With stream groups a kind's outboxes are in several streams, each with
// sequences of its own: [Client.SubscribeKind] refuses FromSeq then; use
// [FromPositions].
func FromSeq(seq uint64) SubscribeOption {
	return func(f *subscribeFrom) { *f = subscribeFrom{all: seq == 0, seq: seq} }
}

// FromPositions starts each stream the subscription reads at its position
// in p (the next sequence to read: [Positions]), and a stream p does not
// name at its first record. An empty (or nil) p is the same as
// [FromStart]. With one stream (no stream groups) a vector of one entry
// is [FromSeq] of it, so one way of resuming serves every layout.
//
// The subscription fails with [ErrInvalid] when p names a stream that is
// not one of the deployment's for what it reads (say, a vector read with
// another stream group count) or holds a position 0. p names the outbox
// streams ([bus.Names.OutboxStreams]) for [Client.Subscribe] and
// [Client.SubscribeKind] (Subscribe reads the entry of its effector's
// stream only, so a kind's vector serves it too), the dead-letter stream
// for [Client.DeadLetters]. p is copied.
func FromPositions(p Positions) SubscribeOption {
	p = p.clone()
	return func(f *subscribeFrom) { *f = subscribeFrom{positions: p} }
}

// subscribeStarts applies opts and returns where each of read (streams of
// the family family) starts. FromSeq with more than one stream to read is
// refused (what names what is read, for the message), as are positions
// naming a stream not of family.
func subscribeStarts(opts []SubscribeOption, family, read []string, what string) ([]subscribeFrom, error) {
	var from subscribeFrom
	for _, opt := range opts {
		if opt != nil {
			opt(&from)
		}
	}
	starts := make([]subscribeFrom, len(read))
	switch {
	case from.positions != nil:
		if err := from.positions.Check(family); err != nil {
			return nil, fmt.Errorf("FromPositions(%s): %w: build the vector from records of this deployment (Positions.Seen with Record.Stream and Record.Seq), or use FromStart", from.positions, err)
		}
		for i, s := range read {
			starts[i] = subscribeFrom{seq: from.positions.At(s)}
		}
	case from.seq > 0 && len(read) > 1:
		return nil, invalidf("FromSeq(%d): the deployment has %d stream groups, so %s is read from %d streams, each with sequences of its own: use FromPositions (a position per stream: Record.Stream and Record.Seq + 1 of the last record read from each), FromStart, or subscribe to one effector", from.seq, len(read), what, len(read))
	default:
		for i := range starts {
			starts[i] = from
		}
	}
	return starts, nil
}

// OutboxPositions returns the position of every outbox stream's next
// record (its last sequence + 1): [FromPositions] of it starts a
// subscription with the next record, like no option, but with a vector
// that names every stream, so that a subscriber that keeps it up to date
// with [Positions.Seen] resumes every stream exactly, even those it has
// read nothing from.
func (c *Client) OutboxPositions(ctx context.Context) (Positions, error) {
	p := Positions{}
	for g, name := range c.names.OutboxStreams() {
		s, err := c.conn.OutboxStreamOf(ctx, g)
		if err != nil {
			return nil, fmt.Errorf("outbox positions: %w", err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("outbox positions: stream %s: %w", name, err)
		}
		p[name] = info.State.LastSeq + 1
	}
	return p, nil
}

// Subscribe follows the records effector ref emits (its outbox), from now on
// unless an option says otherwise. The subscription exists when Subscribe
// returns, so records emitted after it are not missed. Range over the result;
// it ends when ctx ends, the loop breaks, or after the effector's end record
// ([TypeEnd], written when it is terminated), with no error. A record that
// cannot be decoded is yielded with its error and the stream goes on.
func (c *Client) Subscribe(ctx context.Context, ref records.Ref, opts ...SubscribeOption) (iter.Seq2[records.Record, error], error) {
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w: %w", ref, ErrInvalid, err)
	}
	stream := c.names.OutboxStreamFor(ref)
	starts, err := subscribeStarts(opts, c.names.OutboxStreams(), []string{stream}, "an outbox")
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", ref, err)
	}
	msgs, err := c.follow(ctx, stream, c.names.Outbox(ref), starts[0])
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", ref, err)
	}
	return untilEnd(ref, recordsOf(msgs)), nil
}

// SubscribeKind follows the records every effector of kind emits (their
// outboxes), from now on unless an option says otherwise; see
// [Client.Subscribe]. Each effector's records come in the order it emitted
// them. With stream groups (docs/layout.md) the kind's outboxes are in every
// group's outbox stream, followed together: records of effectors in
// different groups interleave as they arrive. A sequence is one stream's,
// so [FromSeq] is refused then: resume with [FromPositions], a position
// per stream, kept up to date from each record's Stream and Seq (it works
// with one stream too):
//
//	pos := actor.Positions{}                 // or c.OutboxPositions(ctx)
//	recs, err := c.SubscribeKind(ctx, "counter", actor.FromPositions(pos))
//	for rec, err := range recs {
//		// handle rec, then
//		pos.Seen(rec.Stream, rec.Seq)
//	}
//	// later, in this process or another (pos.String, ParsePositions):
//	recs, err = c.SubscribeKind(ctx, "counter", actor.FromPositions(pos))
func (c *Client) SubscribeKind(ctx context.Context, kind string, opts ...SubscribeOption) (iter.Seq2[records.Record, error], error) {
	if err := records.ValidateKind(kind); err != nil {
		return nil, fmt.Errorf("subscribe to kind %q: %w: %w", kind, ErrInvalid, err)
	}
	streams, subject := c.names.OutboxStreams(), c.names.KindOutboxes(kind)
	starts, err := subscribeStarts(opts, streams, streams, subject)
	if err != nil {
		return nil, fmt.Errorf("subscribe to kind %s: %w", kind, err)
	}
	msgs, err := c.followAll(ctx, streams, subject, starts)
	if err != nil {
		return nil, fmt.Errorf("subscribe to kind %s: %w", kind, err)
	}
	return recordsOf(msgs), nil
}

// followAll is [Client.follow] of subject in each of streams at once (a
// kind's outboxes in every stream group's outbox stream), each from its
// start in starts: the consumers exist when it returns; ranging over the
// result merges their messages as they arrive, each stream's in its order,
// until ctx ends, the loop breaks or a stream fails (its error is yielded
// once and ends it).
func (c *Client) followAll(ctx context.Context, streams []string, subject string, starts []subscribeFrom) (iter.Seq2[jetstream.Msg, error], error) {
	if len(streams) == 1 {
		return c.follow(ctx, streams[0], subject, starts[0])
	}
	// The followers stop when ctx ends or when the merged loop ends,
	// whichever is first (stop).
	fctx, stop := context.WithCancel(ctx)
	each := make([]iter.Seq2[jetstream.Msg, error], len(streams))
	for i, stream := range streams {
		msgs, err := c.follow(fctx, stream, subject, starts[i])
		if err != nil {
			stop()
			return nil, fmt.Errorf("stream %s: %w", stream, err)
		}
		each[i] = msgs
	}
	type item struct {
		msg jetstream.Msg
		err error
	}
	return func(yield func(jetstream.Msg, error) bool) {
		ch := make(chan item)
		var wg sync.WaitGroup
		defer func() {
			stop()
			wg.Wait()
		}()
		for _, msgs := range each {
			wg.Go(func() {
				for msg, err := range msgs {
					select {
					case ch <- item{msg, err}:
					case <-fctx.Done():
						return
					}
				}
			})
		}
		for {
			select {
			case it := <-ch:
				if !yield(it.msg, it.err) || it.err != nil {
					return
				}
			case <-fctx.Done():
				return
			}
		}
	}, nil
}

// recordsOf turns followed messages into records: a message that does not
// decode is yielded with its error and the stream goes on; a failure of the
// stream itself is yielded once and ends it.
func recordsOf(msgs iter.Seq2[jetstream.Msg, error]) iter.Seq2[records.Record, error] {
	return func(yield func(records.Record, error) bool) {
		for msg, err := range msgs {
			if err != nil {
				yield(records.Record{}, err)
				return
			}
			rec, err := recordOf(msg)
			if !yield(rec, err) {
				return
			}
		}
	}
}

// DeadLetter is a record an effector could not process.
type DeadLetter struct {
	Record records.Record
	// Reason is the short code: decode, content_type, oversize, rejected,
	// failed, panic, redelivered, cancelled, no_effector, terminated,
	// reply_forbidden, output_too_large, state_too_large or corrupt_state.
	Reason string
	// Error says what went wrong.
	Error string
	// Seq is the record's sequence in the mailbox, and Stream the stream
	// holding it: where to read the original whole.
	Seq    uint64
	Stream string
	// Truncated lists what of the original the dead letter leaves out
	// because the copy would exceed the server's limits:
	// records.TruncatedPayload (Record.Payload is cut short) and
	// records.TruncatedHeaders (some envelope headers are missing). Empty
	// when the dead letter carries the whole record.
	Truncated []string
	// DecodeErr is set when the record itself cannot be decoded; Record then
	// holds what could be read.
	DecodeErr error
}

// DeadLetters follows the dead letters of effector ref, from its first unless
// an option says otherwise (options as for Subscribe, sequences of the dead
// letter stream).
func (c *Client) DeadLetters(ctx context.Context, ref records.Ref, opts ...SubscribeOption) (iter.Seq2[DeadLetter, error], error) {
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w: %w", ref, ErrInvalid, err)
	}
	dead := []string{c.names.DeadStream()}
	starts, err := subscribeStarts(append([]SubscribeOption{FromStart()}, opts...), dead, dead, "the dead letters")
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", ref, err)
	}
	msgs, err := c.follow(ctx, dead[0], c.names.Dead(ref), starts[0])
	if err != nil {
		return nil, fmt.Errorf("dead letters of %s: %w", ref, err)
	}
	return func(yield func(DeadLetter, error) bool) {
		for msg, err := range msgs {
			if err != nil {
				yield(DeadLetter{}, err)
				return
			}
			h := msg.Headers()
			dl := DeadLetter{Reason: h.Get(HeaderDeadReason), Error: h.Get(records.HeaderError)}
			dl.Seq, _ = strconv.ParseUint(h.Get(HeaderSeq), 10, 64)
			dl.Stream = h.Get(records.HeaderStream)
			if t := h.Get(records.HeaderTruncated); t != "" {
				dl.Truncated = strings.Split(t, ",")
			}
			if slices.Contains(dl.Truncated, records.TruncatedPayload) {
				// A payload cut short is not well formed: read the envelope.
				dl.Record, dl.DecodeErr = records.FromMsg(h.Get(HeaderSubject), h, nil)
				dl.Record.Payload = msg.Data()
			} else {
				dl.Record, dl.DecodeErr = records.FromMsg(h.Get(HeaderSubject), h, msg.Data())
			}
			if !yield(dl, nil) {
				return
			}
		}
	}, nil
}

func recordOf(msg jetstream.Msg) (records.Record, error) {
	rec, err := records.FromMsg(msg.Subject(), msg.Headers(), msg.Data())
	rec.Subject = msg.Subject()
	if meta, merr := msg.Metadata(); merr == nil {
		rec.Stream, rec.Seq = meta.Stream, meta.Sequence.Stream
	}
	return rec, err
}

// follow starts an ordered consumer on subject of stream from where from
// says (see subscribeStarts) and returns its messages until ctx ends or the
// caller stops.
func (c *Client) follow(ctx context.Context, stream, subject string, from subscribeFrom) (iter.Seq2[jetstream.Msg, error], error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverNewPolicy}
	switch {
	case from.seq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from.seq
	case from.all:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, err := c.conn.JetStream().OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	return func(yield func(jetstream.Msg, error) bool) {
		defer func() {
			stop()
			it.Stop()
		}()
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				yield(nil, err)
				return
			}
			if !yield(msg, nil) {
				return
			}
		}
	}, nil
}
