package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Counters returns the refs counter/<prefix>0 .. counter/<prefix><n-1>.
func Counters(prefix string, n int) []records.Ref {
	refs := make([]records.Ref, n)
	for i := range refs {
		refs[i] = records.Ref{Kind: "counter", ID: fmt.Sprint(prefix, i)}
	}
	return refs
}

// asyncJS returns a JetStream context allowing window asynchronous publishes
// in flight, counting failed ones in failed.
func asyncJS(conn *bus.Conn, window int, failed *atomic.Int64, firstErr *atomic.Value) (jetstream.JetStream, error) {
	js, err := jetstream.New(conn.NATS(),
		jetstream.WithPublishAsyncMaxPending(window),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err)
		}))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// publishAll publishes msgs asynchronously with at most window in flight and
// waits until the server acknowledged them all.
func publishAll(ctx context.Context, conn *bus.Conn, window int, n int, msg func(i int) (*nats.Msg, error)) error {
	if window < 1 {
		return fmt.Errorf("%w: window %d: must be at least 1", ErrInvalid, window)
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	js, err := asyncJS(conn, window, &failed, &firstErr)
	if err != nil {
		return err
	}
	for i := range n {
		m, err := msg(i)
		if err != nil {
			return err
		}
		for {
			_, err = js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute))
			if err == nil || ctx.Err() != nil {
				break
			}
			if err != jetstream.ErrTooManyStalledMsgs {
				return fmt.Errorf("publish %s: %w", m.Subject, err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d publishes failed; first: %v", f, n, firstErr.Load())
	}
	return nil
}

// CreateDocs writes a fresh counter state document (status IDLE, count 0, seq
// 0: what Client.Create writes) for every ref straight into the state bucket,
// with at most window writes in flight. The effectors are passive until a
// record arrives for them.
func CreateDocs(ctx context.Context, conn *bus.Conn, refs []records.Ref, window int) error {
	state, err := codec.Marshal(kinds.CounterState{})
	if err != nil {
		return err
	}
	names := conn.Names()
	now := time.Now().UTC()
	return publishAll(ctx, conn, window, len(refs), func(i int) (*nats.Msg, error) {
		r := refs[i]
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("%w: CreateDocs: %w", ErrInvalid, err)
		}
		doc := actor.Document{ID: r.ID, Kind: r.Kind, Status: actor.StatusIdle, State: state, Updated: now}
		data, err := codec.Marshal(doc)
		if err != nil {
			return nil, err
		}
		return &nats.Msg{Subject: names.StateSubject(r), Data: data}, nil
	})
}

// Publish puts total "inc" records round-robin into the mailboxes of refs,
// with at most window in flight, and waits until all are stored.
func Publish(ctx context.Context, conn *bus.Conn, refs []records.Ref, total, window int) error {
	if len(refs) == 0 {
		return fmt.Errorf("%w: Publish: no effectors", ErrInvalid)
	}
	names := conn.Names()
	return publishAll(ctx, conn, window, total, func(i int) (*nats.Msg, error) {
		rec, err := records.New("inc", nil)
		if err != nil {
			return nil, err
		}
		return rec.Msg(names.Mailbox(refs[i%len(refs)])), nil
	})
}

// Outputs counts the outputs effectors emit on their outboxes (a core NATS
// subscription on <prefix>.out.>), in total and per effector, each record id
// once: a publish retried after a timeout reaches core subscribers again
// though the stream keeps one copy.
type Outputs struct {
	sub    *nats.Subscription
	prefix string

	total atomic.Int64
	mu    sync.Mutex
	ids   map[string]struct{}  // output record ids seen
	dups  int                  // outputs seen again with an id already seen
	per   map[string]int       // effector id → outputs
	last  map[string]time.Time // effector id → time of its last output
	tenth struct {
		at   int64
		when time.Time
	}
}

// WatchOutputs subscribes to the outboxes of conn's prefix.
func WatchOutputs(conn *bus.Conn) (*Outputs, error) {
	prefix := conn.Names().Prefix() + ".out."
	o := &Outputs{prefix: prefix, per: map[string]int{}, last: map[string]time.Time{}, ids: map[string]struct{}{}}
	sub, err := conn.NATS().Subscribe(prefix+">", func(m *nats.Msg) {
		now := time.Now()
		id := m.Header.Get(nats.MsgIdHdr)
		o.mu.Lock()
		if _, dup := o.ids[id]; dup && id != "" {
			// A publish the node retried (after a timeout): the stream drops
			// it as a duplicate, but core subscribers see it again.
			o.dups++
			o.mu.Unlock()
			return
		}
		if id != "" {
			o.ids[id] = struct{}{}
		}
		n := o.total.Add(1)
		key := strings.TrimPrefix(m.Subject, prefix)
		o.per[key]++
		o.last[key] = now
		if o.tenth.at > 0 && n == o.tenth.at {
			o.tenth.when = now
		}
		o.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to outputs: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	if err := conn.NATS().Flush(); err != nil {
		return nil, err
	}
	o.sub = sub
	return o, nil
}

// Close unsubscribes.
func (o *Outputs) Close() error { return o.sub.Unsubscribe() }

// Duplicates returns how many outputs were seen again with an id already
// seen (publishes retried by a node).
func (o *Outputs) Duplicates() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dups
}

// Total returns the distinct outputs seen so far.
func (o *Outputs) Total() int64 { return o.total.Load() }

// MarkAt asks for the time at which the total reaches n (see MarkedAt).
func (o *Outputs) MarkAt(n int64) {
	o.mu.Lock()
	o.tenth.at, o.tenth.when = n, time.Time{}
	o.mu.Unlock()
}

// MarkedAt returns when the total reached the count given to MarkAt.
func (o *Outputs) MarkedAt() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tenth.when
}

// Of returns the outputs of ref (kind.id keys) and the time of its last one.
func (o *Outputs) Of(r records.Ref) (int, time.Time) {
	key := r.Kind + "." + r.ID
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.per[key], o.last[key]
}

// WaitTotal polls until the total reaches n or ctx ends.
func (o *Outputs) WaitTotal(ctx context.Context, n int64) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for o.total.Load() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("saw %d of %d outputs: %w", o.total.Load(), n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
