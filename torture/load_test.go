//go:build unix

package torture

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// input is one record the publisher sent to a counter.
type input struct {
	id  string
	by  int64
	bad string // why the counter must dead-letter it; "" for a good inc
}

// publisher sends inc records to the counters round-robin at a steady rate
// and never loses one: every record has a Nats-Msg-Id, and a record whose
// publish failed — at the PublishMsgAsync call or on its future — is
// published again until the stream acknowledges it (a copy already stored is
// a duplicate the stream drops and answers with the first copy's sequence).
// So every input missing from the log later is the runtime's loss.
type publisher struct {
	js       jetstream.JetStream
	counters []string
	rate     int // records per second
	badEvery int // every badEvery-th record is bad input (0: none)

	mu     sync.Mutex
	stored map[string]uint64  // counter -> highest mailbox sequence acknowledged
	inputs map[string][]input // counter -> inputs in the order published

	sent    atomic.Int64 // records acknowledged
	retries atomic.Int64 // publishes retried
}

func newPublisher(js jetstream.JetStream, counters []string, rate, badEvery int) *publisher {
	return &publisher{js: js, counters: counters, rate: rate, badEvery: badEvery,
		stored: map[string]uint64{}, inputs: map[string][]input{}}
}

// storedNow is a copy of the highest acknowledged sequence per counter.
func (p *publisher) storedNow() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]uint64, len(p.stored))
	for k, v := range p.stored {
		m[k] = v
	}
	return m
}

// run publishes until stop is closed, then one last good inc to every
// counter (so that every mailbox ends with a record to apply and its state
// is IDLE at the end), and returns nil once all are acknowledged, or an
// error if ctx ends first.
func (p *publisher) run(ctx context.Context, stop <-chan struct{}) error {
	const tick = 100 * time.Millisecond
	batch := max(1, p.rate*int(tick)/int(time.Second))
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	n := 0
	for {
		select {
		case <-stop:
			var last []*nats.Msg
			for i, c := range p.counters {
				last = append(last, p.msg(c, n+i, false))
			}
			return p.publish(ctx, last)
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		msgs := make([]*nats.Msg, batch)
		for i := range msgs {
			msgs[i] = p.msg(p.counters[n%len(p.counters)], n, p.badEvery > 0 && n%p.badEvery == p.badEvery-1)
			n++
		}
		if err := p.publish(ctx, msgs); err != nil {
			return err
		}
	}
}

// msg is the n-th record of the load, for counter c, bad input if bad.
func (p *publisher) msg(c string, n int, bad bool) *nats.Msg {
	in := input{id: fmt.Sprintf("t-%s-%d", c, n), by: int64(1 + n%3)}
	m := nats.NewMsg("ea.mbox.counter." + c)
	m.Header.Set("Nats-Msg-Id", in.id)
	m.Header.Set("Content-Type", "application/json")
	m.Header.Set("EA-Type", "inc")
	m.Data = fmt.Appendf(nil, `{"by":%d}`, in.by)
	if bad {
		if n%(2*p.badEvery) < p.badEvery { // alternately an unknown type and a payload that does not decode
			in.bad = "type dec"
			m.Header.Set("EA-Type", "dec")
		} else {
			in.bad = `payload {"by":"x"}`
			m.Data = []byte(`{"by":"x"}`)
		}
		in.by = 0
	}
	p.mu.Lock()
	p.inputs[c] = append(p.inputs[c], in)
	p.mu.Unlock()
	return m
}

// publish publishes msgs asynchronously and waits until the stream has
// acknowledged each, publishing again every one whose call or future
// failed.
func (p *publisher) publish(ctx context.Context, msgs []*nats.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := p.js.PublishMsgAsync(m)
		if err != nil { // e.g. disconnected, or the async window stalled
			if err := p.untilAcked(ctx, m); err != nil {
				return err
			}
			continue
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			p.acked(f.Msg(), ack)
		case <-f.Err():
			if err := p.untilAcked(ctx, f.Msg()); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// untilAcked publishes m synchronously until the stream acknowledges it.
func (p *publisher) untilAcked(ctx context.Context, m *nats.Msg) error {
	for attempt := 1; ; attempt++ {
		p.retries.Add(1)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := p.js.PublishMsg(pctx, m)
		cancel()
		if err == nil {
			p.acked(m, ack)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish %s: gave up after %d attempts: %w", m.Header.Get("Nats-Msg-Id"), attempt, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *publisher) acked(m *nats.Msg, ack *jetstream.PubAck) {
	c := m.Subject[len("ea.mbox.counter."):]
	p.mu.Lock()
	p.stored[c] = max(p.stored[c], ack.Sequence)
	p.mu.Unlock()
	p.sent.Add(1)
}
