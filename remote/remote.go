package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/retry"
)

// Encoding is how requests and replies are encoded: a content type.
type Encoding string

// Encodings of the contract (docs/polyglot.md).
const (
	// JSON is readable from any language with its standard library.
	JSON Encoding = records.ContentJSON
	// Msgpack carries payloads and state exactly as stored (binary data,
	// integer map keys, no float/integer ambiguity).
	Msgpack Encoding = records.ContentMsgpack
)

// ParseEncoding returns the encoding named "json" or "msgpack" (or their
// content types).
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "json", string(JSON):
		return JSON, nil
	case "msgpack", string(Msgpack):
		return Msgpack, nil
	}
	return "", fmt.Errorf("%w: encoding %q: want json or msgpack", ErrInvalid, s)
}

// Version is the protocol version a node puts in every request ("v").
const Version = 1

// Defaults of [Options].
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxReply   = 1 << 20
	DefaultMaxRecords = 1000
)

// DefaultRetry is the retry policy of a remote kind unless its Options set
// one: 10 attempts, waits of 200ms doubling up to 5s (about 25s in all
// besides the timeouts), so that records wait out a worker restart rather
// than go to dead letters.
func DefaultRetry() retry.Policy {
	return retry.Policy{Attempts: 10, Backoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second, Multiplier: 2}
}

// Options configure a remote kind. The zero value is usable.
type Options struct {
	// Encoding of requests; a worker answers in the same one unless its
	// reply's Content-Type header says otherwise. Default [JSON].
	Encoding Encoding
	// Timeout bounds one request: a worker that does not answer in time
	// (it died, hangs, or is overloaded) fails the attempt with
	// [ErrTimeout], which the retry policy retries. Default 10s. The
	// attempt's own deadline (actor.Kind.Timeout), when earlier, wins.
	Timeout time.Duration
	// MaxReply is the largest reply accepted, in bytes. Default 1 MiB.
	MaxReply int
	// MaxRecords is the most records one reply may ask to send. Default
	// 1000.
	MaxRecords int
	// Initial is the state of an effector created without one; it must
	// encode as msgpack. Default: an empty map.
	Initial any
	// Retry is the kind's retry policy; the zero value means
	// [DefaultRetry].
	Retry retry.Policy
	// Registerer, when set, receives the kind's metrics:
	// ea_remote_requests_total{kind, outcome} (ok, worker_error,
	// permanent, malformed, timeout, no_worker, error), the histogram
	// ea_remote_request_seconds{kind} of answered requests, and the gauges
	// ea_remote_stalled{kind} (1 while its requests find no worker or go
	// unanswered) and ea_remote_waiting_effectors{kind} (effectors whose
	// record waits for a worker). Kinds sharing a registry share the
	// metrics.
	Registerer prometheus.Registerer
	// Logger receives a WARN when the kind's requests start to find no
	// worker or go unanswered (once per episode, naming the kind and the
	// subject) and an INFO when a worker answers again. Default: none.
	Logger *slog.Logger
	// Types are the record types the kind handles (actor.Kind.Types): ea
	// send and the gateway refuse others. Empty: the types the workers
	// announce (docs/polyglot.md, "Discovery"), or any type when they
	// announce none.
	Types []string
}

// New returns kind name, whose logic runs in worker processes: for each
// record, the node sends a request on <prefix>.logic.<name> (see
// bus.Names.Logic) over conn and applies the reply (docs/polyglot.md). The
// node keeps what it keeps for any kind: order, state, effectively-once,
// dead letters. Host the result on a node like any actor.Kind; its fields
// (Window, MaxBatch, MaxPayload, Accept, ...) may be adjusted first.
//
// conn is used for requests only; it may be the node's own connection.
// Errors match [ErrInvalid].
func New(conn *bus.Conn, name string, opts Options) (actor.Kind[State], error) {
	if conn == nil || conn.NATS() == nil {
		return actor.Kind[State]{}, fmt.Errorf("%w: kind %s: conn must be a connected *bus.Conn", ErrInvalid, name)
	}
	if err := records.ValidateKind(name); err != nil {
		return actor.Kind[State]{}, fmt.Errorf("%w: kind: %w", ErrInvalid, err)
	}
	l := &logic{
		name:       name,
		nc:         conn.NATS(),
		subject:    conn.Names().Logic(name),
		ping:       conn.Names().LogicPing(name),
		enc:        opts.Encoding,
		timeout:    opts.Timeout,
		maxReply:   opts.MaxReply,
		maxRecords: opts.MaxRecords,
	}
	if l.enc == "" {
		l.enc = JSON
	}
	if l.enc != JSON && l.enc != Msgpack {
		return actor.Kind[State]{}, fmt.Errorf("%w: kind %s: Encoding %q: want remote.JSON or remote.Msgpack", ErrInvalid, name, l.enc)
	}
	switch {
	case l.timeout < 0, l.maxReply < 0, l.maxRecords < 0:
		return actor.Kind[State]{}, fmt.Errorf("%w: kind %s: Timeout, MaxReply and MaxRecords must not be negative", ErrInvalid, name)
	}
	if l.timeout == 0 {
		l.timeout = DefaultTimeout
	}
	if l.maxReply == 0 {
		l.maxReply = DefaultMaxReply
	}
	if l.maxRecords == 0 {
		l.maxRecords = DefaultMaxRecords
	}
	policy := opts.Retry
	if policy.IsZero() {
		policy = DefaultRetry()
	}
	// A waiting effector not heard of for longer than a request and the
	// longest wait between two attempts has left (dead letters, another
	// node).
	l.health = newHealth(name, l.subject, opts.Logger, l.timeout+max(policy.MaxBackoff, policy.Backoff, 5*time.Second)+time.Second)
	m, err := newMetrics(opts.Registerer, name, l.health)
	if err != nil {
		return actor.Kind[State]{}, fmt.Errorf("kind %s: %w", name, err)
	}
	l.metrics = m
	initial := opts.Initial
	if initial == nil {
		initial = map[string]any{}
	}
	b, err := codec.Marshal(initial)
	if err != nil {
		return actor.Kind[State]{}, fmt.Errorf("%w: kind %s: Initial %T does not encode as msgpack: %w", ErrInvalid, name, initial, err)
	}
	return actor.Kind[State]{Name: name, Initial: State(b), Logic: l.run, Retry: policy, Types: opts.Types, Describe: l.describe}, nil
}

// logic is a remote kind's logic: one request per record.
type logic struct {
	name       string
	nc         *nats.Conn
	subject    string // requests and probes
	ping       string // the workers' discovery
	enc        Encoding
	timeout    time.Duration
	maxReply   int
	maxRecords int
	metrics    *metrics
	health     *health
}

// run is the actor.Logic of the kind.
func (l *logic) run(ctx *actor.Context, s State) (State, error) {
	self := ctx.Self()
	body, err := l.request(ctx, s)
	if err != nil {
		l.health.forget(self)
		return s, err
	}
	// The request ends with its answer, the timeout, the attempt, or the
	// watch finding that no worker is subscribed any more (one died
	// holding it and none is left).
	gone, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	rctx, cancel := context.WithTimeout(gone, l.timeout)
	defer cancel()
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		l.watch(rctx, done, stop)
	}()
	msg := &nats.Msg{Subject: l.subject, Data: body, Header: nats.Header{}}
	msg.Header.Set(records.HeaderContentType, string(l.enc))
	start := time.Now()
	resp, err := l.nc.RequestMsgWithContext(rctx, msg)
	took := time.Since(start)
	close(done)
	<-watched
	if err != nil {
		err = l.transport(ctx, context.Cause(gone), err)
		outcome := outcomeError
		switch {
		case errors.Is(err, ErrTimeout):
			outcome = outcomeTimeout
		case errors.Is(err, ErrNoWorker):
			outcome = outcomeNoWorker
		}
		if outcome == outcomeError {
			l.health.forget(self)
		} else {
			l.health.failed(self, ctx.Record().ID, err, time.Now())
		}
		l.metrics.observe(l.name, outcome, false, took)
		return s, err
	}
	l.health.answered(self, time.Now())
	next, err := l.apply(ctx, resp)
	var we *WorkerError
	outcome := outcomeOK
	switch {
	case errors.As(err, &we) && we.Permanent:
		outcome = outcomePermanent
	case errors.As(err, &we):
		outcome = outcomeWorkerError
	case err != nil:
		outcome = outcomeMalformed
	}
	l.metrics.observe(l.name, outcome, true, took)
	return next, err
}

// transport maps a failed request to the runtime's vocabulary; cause is
// why the request's own context ended, if it did.
func (l *logic) transport(ctx context.Context, cause, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		// The attempt was cancelled (node stopping, a cancel record): say
		// why, so the runtime sees its own cause.
		return fmt.Errorf("remote kind %s: %w", l.name, context.Cause(ctx))
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w: nothing listens on %s: start a worker of kind %s (docs/polyglot.md)", ErrNoWorker, l.subject, l.name)
	case errors.Is(cause, errWorkerGone):
		return fmt.Errorf("%w: the worker holding the request left and nothing listens on %s any more: start a worker of kind %s (docs/polyglot.md)", ErrNoWorker, l.subject, l.name)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w: no reply on %s within %s", ErrTimeout, l.subject, l.timeout)
	case errors.Is(err, nats.ErrMaxPayload):
		return retry.Permanent(fmt.Errorf("%w: the request (record and state) exceeds the server's max_payload: %w", actor.ErrTooLarge, err))
	}
	return fmt.Errorf("remote kind %s: request on %s: %w", l.name, l.subject, err)
}

// State is the state of a remote kind: one msgpack value, stored and passed
// to workers as it is (empty means nil). It encodes itself as that value in
// msgpack and converts to and from JSON, so the control endpoints and the ea
// CLI show and take it like any state.
type State []byte

var (
	_ msgpack.CustomEncoder = State(nil)
	_ msgpack.CustomDecoder = (*State)(nil)
)

// EncodeMsgpack writes the value.
func (s State) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(s) == 0 {
		return enc.EncodeNil()
	}
	return enc.Encode(msgpack.RawMessage(s))
}

// DecodeMsgpack reads one value.
func (s *State) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return err
	}
	*s = State(raw)
	return nil
}

// MarshalJSON returns the value as JSON.
func (s State) MarshalJSON() ([]byte, error) { return msgpackToJSON(s) }

// UnmarshalJSON reads a JSON value, keeping integers integers.
func (s *State) UnmarshalJSON(data []byte) error {
	b, err := codec.FromJSON(data)
	if err != nil {
		return err
	}
	*s = State(b)
	return nil
}
