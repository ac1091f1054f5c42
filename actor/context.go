package actor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// Context is what logic gets besides its state: the record in hand, the
// effector's own name, a logger, and ways to send records. It is a
// context.Context, cancelled when the attempt times out or the node stops for
// good; pass it to blocking calls.
//
// Records sent through a Context are held and published only when the logic
// succeeds, each with the id <input record id>:<n>.<tag> (the tag signs it
// with the node's output key, so clients cannot predict it), so a retried or
// redelivered record never publishes its outputs twice.
//
// Middleware that needs the logic to see a derived context.Context (values,
// a shorter deadline) passes [Context.WithContext] on; the derived Context
// holds the same outputs.
type Context struct {
	ctx context.Context
	*call
}

// call is what every Context of one attempt shares: the record in hand and
// the outputs held so far. Logic runs on one goroutine, so none of it is
// locked; a Context must not be used after the logic returns.
type call struct {
	self  records.Ref
	rec   records.Record
	base  *slog.Logger // the node's: Logger adds the effector and the record, when asked
	log   *slog.Logger
	names bus.Names
	// routes decides where outputs may go; maxMsg is the largest message
	// the server takes (0: unknown, not checked).
	routes bus.Routes
	maxMsg int64
	// refused is the first output refused by check: the attempt fails with
	// it even if the logic ignores the error.
	refused error
	now     time.Time // the time of the outputs, taken once
	outbox  string    // the effector's own outbox subject, made once (ownOutbox)
	outs    []output
	// now publishes a streamed record at once (EmitNow); nil outside a node,
	// where streamed records join the outputs.
	publishNow func(output) error
	streamed   int
	// ids signs output ids (see [Context.outputID]); nil outside a node.
	ids *idSigner
	// timerNames are the effector's timers, read by timerList when logic
	// first sets one (timer.go); timerList is nil outside a node.
	timerNames map[string]struct{}
	timerList  func(context.Context, records.Ref) (map[string]struct{}, error)
}

// newCallContext returns the Context of one attempt of the logic.
func newCallContext(ctx context.Context, c *call) *Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Context{ctx: ctx, call: c}
}

// WithContext returns a Context of the same attempt (the same record, the
// same held outputs) whose context.Context is ctx, for middleware that hands
// the logic a derived context (see [Middleware]). ctx must be derived from c.
// A nil ctx is refused by returning c itself.
func (c *Context) WithContext(ctx context.Context) *Context {
	if ctx == nil {
		return c
	}
	return &Context{ctx: ctx, call: c.call}
}

// Deadline implements context.Context.
func (c *Context) Deadline() (time.Time, bool) { return c.ctx.Deadline() }

// Done implements context.Context.
func (c *Context) Done() <-chan struct{} { return c.ctx.Done() }

// Err implements context.Context.
func (c *Context) Err() error { return c.ctx.Err() }

// Value implements context.Context.
func (c *Context) Value(key any) any { return c.ctx.Value(key) }

// output is a record to publish on subject once logic succeeds.
type output struct {
	subject string
	rec     records.Record
	// stream is false for a reply to a plain NATS subject (core publish).
	stream bool
	// msg, when set, is the message to publish instead of building rec's:
	// a timer's schedule or cancellation (see timer.go), or rec's own
	// message as [Context.check] built it to measure it.
	msg *nats.Msg
}

// message is the NATS message of o.
func (o output) message() *nats.Msg {
	if o.msg != nil {
		return o.msg
	}
	return o.rec.Msg(o.subject)
}

// Self returns the effector running the logic.
func (c *Context) Self() records.Ref { return c.self }

// Record returns the record in hand.
func (c *Context) Record() records.Record { return c.rec }

// Logger returns a logger carrying the effector and record id.
func (c *Context) Logger() *slog.Logger {
	if c.log == nil {
		c.log = c.base.With("effector", c.self.String(), "record", c.rec.ID)
	}
	return c.log
}

// Decode decodes the record's payload into v. A payload that does not fit is
// a permanent error: return it and the record goes to dead letters at once.
func (c *Context) Decode(v any) error {
	if err := c.rec.Decode(v); err != nil {
		return Permanent(err)
	}
	return nil
}

// SendOption adjusts a record sent from logic.
type SendOption func(*records.Record) error

// High sends the record with EA-Priority: high.
func High() SendOption {
	return func(r *records.Record) error { r.Priority = records.PriorityHigh; return nil }
}

// InProcess sets EA-Process (by default the input record's process is kept).
func InProcess(id string) SendOption {
	return func(r *records.Record) error { r.Process = id; return nil }
}

// ReplyTo sets EA-Reply, where the receiver should answer.
func ReplyTo(subject string) SendOption {
	return func(r *records.Record) error { r.Reply = subject; return nil }
}

// JSON encodes the payload as JSON instead of msgpack.
func JSON() SendOption {
	return func(r *records.Record) error {
		if r.ContentType == records.ContentJSON {
			return nil
		}
		var v any
		if len(r.Payload) > 0 {
			if err := codec.Unmarshal(r.Payload, &v); err != nil {
				return err
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if v == nil {
			b = nil
		}
		r.Payload, r.ContentType = b, records.ContentJSON
		return nil
	}
}

// Send sends a record of type typ with payload (msgpack-encoded; nil for
// none) to the mailbox of effector to.
func (c *Context) Send(to records.Ref, typ string, payload any, opts ...SendOption) error {
	if err := to.Validate(); err != nil {
		return fmt.Errorf("send to %s: %w: %w", to, ErrInvalid, err)
	}
	return c.add(c.names.Mailbox(to), typ, payload, opts)
}

// Emit publishes a record on the effector's outbox, where subscribers see it.
func (c *Context) Emit(typ string, payload any, opts ...SendOption) error {
	return c.add(c.ownOutbox(), typ, payload, opts)
}

// ownOutbox is the effector's outbox subject, made on first use.
func (c *Context) ownOutbox() string {
	if c.outbox == "" {
		c.outbox = c.names.Outbox(c.self)
	}
	return c.outbox
}

// EmitNow publishes a record on the effector's outbox at once, without
// waiting for the logic to succeed: for streaming partial results (text
// chunks, progress events) while logic runs. Its id is <input id>:s<n>, so
// the chunks a retried or redelivered record publishes again are dropped by
// the stream's duplicate window. Unlike Emit it blocks until the record is
// stored, and a chunk published before a failure stays published: readers
// should treat streamed records as provisional until the final output.
func (c *Context) EmitNow(typ string, payload any, opts ...SendOption) error {
	rec, err := c.build(typ, payload, opts)
	if err != nil {
		return err
	}
	rec.ID = c.outputID("s" + strconv.Itoa(c.streamed))
	c.streamed++
	o := output{subject: c.ownOutbox(), rec: rec}
	if err := c.check(&o); err != nil {
		return err
	}
	if c.publishNow == nil {
		c.outs = append(c.outs, o)
		return nil
	}
	return c.publishNow(o)
}

// Reply answers the record in hand on its EA-Reply subject: durably when that
// subject is a mailbox, as a plain NATS message when it is a subject the
// node's Options.ReplySubjects allow (NATS request inboxes by default). A
// subject records may not be sent to fails with a permanent error matching
// [ErrForbidden] (a node dead-letters such a record before its logic runs).
func (c *Context) Reply(typ string, payload any, opts ...SendOption) error {
	if c.rec.Reply == "" {
		return fmt.Errorf("reply to record %s: %w: it has no EA-Reply", c.rec.ID, ErrInvalid)
	}
	return c.add(c.rec.Reply, typ, payload, opts)
}

// add holds a record for subject until the logic succeeds. A subject records
// may not be sent to, or a record too large for the server, is a permanent
// error ([ErrForbidden], [ErrTooLarge]) and nothing is held.
func (c *Context) add(subject string, typ string, payload any, opts []SendOption) error {
	rec, err := c.build(typ, payload, opts)
	if err != nil {
		return err
	}
	o := output{subject: subject, rec: rec}
	if err := c.check(&o); err != nil {
		return err
	}
	c.outs = append(c.outs, o)
	return nil
}

// build makes the record logic sends, with the id of the next held output.
func (c *Context) build(typ string, payload any, opts []SendOption) (records.Record, error) {
	if typ == "" {
		typ = records.DefaultType
	}
	var body []byte
	if payload != nil {
		var err error
		if body, err = codec.Marshal(payload); err != nil {
			return records.Record{}, fmt.Errorf("%w: record %q: payload %T does not encode: %w", ErrInvalid, typ, payload, err)
		}
	}
	if c.now.IsZero() {
		c.now = time.Now().UTC()
	}
	rec := records.Record{
		ID:          c.outputID(strconv.Itoa(len(c.outs))),
		Type:        typ,
		From:        c.self,
		Process:     c.rec.Process,
		Owner:       c.rec.Owner,
		Cause:       c.rec.ID,
		Time:        c.now,
		ContentType: records.ContentMsgpack,
		Payload:     body,
		TraceParent: c.rec.TraceParent,
		TraceState:  c.rec.TraceState,
	}
	// With tracing on (package tracing), the hop's span is the parent of
	// its outputs; off, they carry the input's trace context unchanged.
	tracectx.Inject(c.ctx, &rec)
	for _, opt := range opts {
		if err := opt(&rec); err != nil {
			return records.Record{}, fmt.Errorf("%w: record %q: %w", ErrInvalid, typ, err)
		}
	}
	if err := rec.Validate(); err != nil {
		return records.Record{}, fmt.Errorf("%w: record %q: %w", ErrInvalid, typ, err)
	}
	return rec, nil
}

// outputID is the id of output n of the record in hand: <in>:<n>.<tag> on a
// node, <in>:<n> outside one (Kind.Apply), where in is the input record's id.
// The tag is an HMAC, with the node's output key (bus.Conn.OutputKey), of the
// effector, the input's stream sequence and id, and n: the id is the same
// every time the record is processed, by any node, so the duplicate window
// drops a re-emission after a crash; it differs between effectors and
// between two inputs that reuse an id, so one never suppresses the other's
// output; and a client that cannot read the key cannot predict it, so it
// cannot suppress an output by publishing its id first.
func (c *Context) outputID(n string) string {
	if c.ids == nil {
		return outputID(c.rec.ID, n)
	}
	return outputID(c.rec.ID, n+"."+c.ids.tag(c.self, c.rec.Seq, c.rec.ID, n))
}

// idTag is the tag of output n of the input record (seq, id) of effector
// self: 80 bits of HMAC-SHA256 with key, in hex.
func idTag(key []byte, self records.Ref, seq uint64, id, n string) string {
	return tagWith(hmac.New(sha256.New, key), self, seq, id, n)
}

// tagWith is idTag with m, a keyed HMAC-SHA256 in its initial state.
func tagWith(m hash.Hash, self records.Ref, seq uint64, id, n string) string {
	var buf [256]byte
	b := buf[:0]
	for _, part := range []string{"ea-output-id", self.Kind, self.ID, strconv.FormatUint(seq, 10), id, n} {
		b = append(append(b, part...), 0)
	}
	m.Write(b)
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0])[:10])
}

// idSigner tags output ids with a node's key (see [Context.outputID]) as
// idTag does, reusing keyed hashes: setting one up hashes the key twice
// and allocates, which every output paid before.
type idSigner struct {
	pool sync.Pool // of keyed HMAC-SHA256 hashes
}

// newIDSigner returns the signer of key; nil for no key (unsigned ids).
func newIDSigner(key []byte) *idSigner {
	if len(key) == 0 {
		return nil
	}
	s := &idSigner{}
	s.pool.New = func() any { return hmac.New(sha256.New, key) }
	return s
}

// tag is idTag with the signer's key.
func (s *idSigner) tag(self records.Ref, seq uint64, id, n string) string {
	m := s.pool.Get().(hash.Hash)
	m.Reset()
	t := tagWith(m, self, seq, id, n)
	s.pool.Put(m)
	return t
}

// outputID is the id of output n of the record with id in: <in>:<n>, with in
// replaced by a hash of it when the result would be too long for an id. Either
// way it is the same every time the record is processed.
func outputID(in string, n string) string {
	suffix := ":" + n
	if len(in)+len(suffix) > records.MaxIDLen {
		sum := sha256.Sum256([]byte(in))
		in = "h" + hex.EncodeToString(sum[:16])
	}
	return in + suffix
}

// newContext returns the context logic runs with on the record d, for one
// attempt.
func (e *effector) newContext(ctx context.Context, d delivery) *Context {
	return newCallContext(ctx, &call{
		self: e.ref, rec: d.rec, base: e.node.log, names: e.node.names,
		routes: e.node.routes, maxMsg: e.node.conn.MaxPayload(),
		publishNow: e.publishNow, ids: e.node.ids, timerList: e.node.timerNames,
	})
}
