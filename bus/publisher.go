package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPublishTimeout is how long [Publisher.PublishMsg] waits for an
// acknowledgement when its context has no deadline: jetstream's own default.
const DefaultPublishTimeout = 5 * time.Second

// ErrAckLost is returned by a [Publisher] made by [Conn.Publisher] when the
// connection went down before the acknowledgement came, or (after
// [Conn.FollowElections]) a stream's leader was elected: the message may or
// may not be stored. Publish it again (with its Nats-Msg-Id, or its expected
// last sequence, the server keeps it once).
var ErrAckLost = errors.New("the acknowledgement was lost (the connection to NATS dropped, or a stream's leader changed): the message may or may not be stored; publish it again")

// Publisher publishes a message to a stream and waits for the server's
// acknowledgement, as jetstream's PublishMsg does, at less cost per call:
// every call shares one subscription for the answers and reuses its reply
// subject's waiter, and an acknowledgement without an error is read without
// encoding/json. It is the runtime's synchronous publish on the hot path: an
// effector's single output and its state's compare-and-set.
//
// Like jetstream's PublishMsg, a call retries twice, 250 ms apart, when no
// stream answers (a leader election), then returns
// [jetstream.ErrNoStreamResponse]; a refusal by the server is a
// [*jetstream.APIError]; a call whose context has no deadline gives up after
// the Publisher's timeout with [context.DeadlineExceeded].
//
// A Publisher is safe for concurrent use. [Publisher.Close] unsubscribes.
type Publisher struct {
	nc      *nats.Conn
	timeout time.Duration
	prefix  string // the reply subject of call n is prefix + n
	sub     *nats.Subscription
	next    atomic.Uint64
	pool    sync.Pool // of *waiter

	// dropped, when set (Conn.Publisher), returns a channel closed when the
	// connection next goes down.
	dropped func() <-chan struct{}

	mu      sync.Mutex // guards waiting
	waiting map[uint64]*waiter
}

// waiter is the answer slot of one call at a time.
type waiter struct {
	answer chan *nats.Msg // capacity 1: the dispatcher never blocks
	timer  *time.Timer
}

// NewPublisher subscribes to the answers of the calls it will make, under
// nc's inbox prefix. A timeout of 0 is [DefaultPublishTimeout].
func NewPublisher(nc *nats.Conn, timeout time.Duration) (*Publisher, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: NewPublisher: no connection", ErrInvalidConfig)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("%w: NewPublisher: timeout %v is negative", ErrInvalidConfig, timeout)
	}
	if timeout == 0 {
		timeout = DefaultPublishTimeout
	}
	p := &Publisher{nc: nc, timeout: timeout, prefix: nc.NewInbox() + ".", waiting: make(map[uint64]*waiter)}
	sub, err := nc.Subscribe(p.prefix+"*", p.dispatch)
	if err != nil {
		return nil, fmt.Errorf("publisher: subscribe to acknowledgements: %w", err)
	}
	p.sub = sub
	return p, nil
}

// Close unsubscribes. Calls in flight then end with their timeout.
func (p *Publisher) Close() error {
	if err := p.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("publisher: unsubscribe: %w", err)
	}
	return nil
}

// dispatch hands an answer to the call whose number ends its subject. An
// answer for a call that already gave up is dropped.
func (p *Publisher) dispatch(m *nats.Msg) {
	if len(m.Subject) <= len(p.prefix) {
		return
	}
	n, err := strconv.ParseUint(m.Subject[len(p.prefix):], 10, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	if w, ok := p.waiting[n]; ok {
		delete(p.waiting, n)
		w.answer <- m
	}
	p.mu.Unlock()
}

// PublishMsg publishes msg and returns the server's acknowledgement. msg is
// not changed, and its Reply is not used: the answer comes to the
// Publisher's own.
func (p *Publisher) PublishMsg(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	timeout := p.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	w, _ := p.pool.Get().(*waiter)
	if w == nil {
		w = &waiter{answer: make(chan *nats.Msg, 1), timer: time.NewTimer(time.Hour)}
	}
	defer p.pool.Put(w)
	w.timer.Reset(timeout)
	defer w.timer.Stop()
	for retry := 0; ; retry++ {
		ans, err := p.call(ctx, w, msg)
		if err != nil {
			return nil, err
		}
		if len(ans.Data) == 0 && ans.Header.Get("Status") == "503" {
			if retry == jetstream.DefaultPubRetryAttempts {
				return nil, jetstream.ErrNoStreamResponse
			}
			pause := time.NewTimer(jetstream.DefaultPubRetryWait)
			select {
			case <-pause.C:
			case <-ctx.Done():
				pause.Stop()
				return nil, ctx.Err()
			case <-w.timer.C:
				pause.Stop()
				return nil, context.DeadlineExceeded
			}
			continue
		}
		return parseAck(ans.Data)
	}
}

// call publishes msg with a fresh reply subject and waits for its answer.
func (p *Publisher) call(ctx context.Context, w *waiter, msg *nats.Msg) (*nats.Msg, error) {
	n := p.next.Add(1)
	out := nats.Msg{Subject: msg.Subject, Reply: p.prefix + strconv.FormatUint(n, 10), Header: msg.Header, Data: msg.Data}
	var dropped <-chan struct{} // nil: never
	if p.dropped != nil {
		dropped = p.dropped()
	}
	p.mu.Lock()
	p.waiting[n] = w
	p.mu.Unlock()
	if err := p.nc.PublishMsg(&out); err != nil {
		p.forget(n, w)
		return nil, err
	}
	select {
	case ans := <-w.answer:
		return ans, nil
	case <-dropped:
		p.forget(n, w)
		return nil, ErrAckLost
	case <-ctx.Done():
		p.forget(n, w)
		return nil, ctx.Err()
	case <-w.timer.C:
		p.forget(n, w)
		return nil, context.DeadlineExceeded
	}
}

// forget withdraws call n, and drops an answer that came meanwhile, so
// that w's next call cannot read it.
func (p *Publisher) forget(n uint64, w *waiter) {
	p.mu.Lock()
	delete(p.waiting, n)
	p.mu.Unlock()
	select {
	case <-w.answer:
	default:
	}
}

// parseAck reads an acknowledgement. The usual answer,
// {"stream":"S","seq":N} perhaps with "duplicate" and "domain", is read by
// hand; anything else (an error, an escaped string, a field it does not
// know) through encoding/json, as jetstream reads it.
func parseAck(data []byte) (*jetstream.PubAck, error) {
	if ack, ok := quickAck(data); ok {
		return ack, nil
	}
	var resp struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("nats: %w", resp.Error)
	}
	if resp.PubAck == nil || resp.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return resp.PubAck, nil
}

// quickAck reads {"stream":"S","seq":N[,"domain":"D"][,"duplicate":true]},
// the fields in any order; ok is false for anything else.
func quickAck(data []byte) (ack *jetstream.PubAck, ok bool) {
	if bytes.IndexByte(data, '\\') >= 0 || len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return nil, false
	}
	ack = &jetstream.PubAck{}
	rest := data[1 : len(data)-1]
	for len(rest) > 0 {
		// "key":
		if rest[0] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(rest[1:], '"')
		if end < 0 || len(rest) < end+3 || rest[end+2] != ':' {
			return nil, false
		}
		key := rest[1 : end+1]
		if !printable(key) {
			return nil, false
		}
		rest = rest[end+3:]
		var val []byte
		if len(rest) > 0 && rest[0] == '"' {
			q := bytes.IndexByte(rest[1:], '"')
			if q < 0 {
				return nil, false
			}
			val, rest = rest[1:q+1], rest[q+2:]
			if !printable(val) {
				return nil, false
			}
			switch string(key) {
			case "stream":
				ack.Stream = string(val)
			case "domain":
				ack.Domain = string(val)
			default:
				return nil, false
			}
		} else {
			comma := bytes.IndexByte(rest, ',')
			if comma < 0 {
				comma = len(rest)
			}
			val, rest = rest[:comma], rest[comma:]
			switch string(key) {
			case "seq":
				seq, err := strconv.ParseUint(string(val), 10, 64)
				if err != nil || val[0] < '1' || val[0] > '9' {
					return nil, false
				}
				ack.Sequence = seq
			case "duplicate":
				if string(val) != "true" && string(val) != "false" {
					return nil, false
				}
				ack.Duplicate = string(val) == "true"
			default:
				return nil, false
			}
		}
		if len(rest) > 0 {
			if rest[0] != ',' || len(rest) == 1 {
				return nil, false
			}
			rest = rest[1:]
		}
	}
	return ack, ack.Stream != "" && ack.Sequence != 0
}

// printable reports whether b is printable ASCII, which JSON holds as is.
func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
