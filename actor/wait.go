package actor

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// WaitReady blocks until the node serves its kinds (what [Node.Ready]
// reports), Run returns, or ctx ends. It returns nil once ready, an error
// wrapping [ErrNotRunning] when Run returned first, and ctx's error when it
// ends first. Call it after starting Run on another goroutine.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.readyCh:
		return nil
	case <-n.doneCh:
		select {
		case <-n.readyCh: // both closed: it was ready
			return nil
		default:
			return fmt.Errorf("%w: the node stopped before it was ready", ErrNotRunning)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StateAt returns ref's state document once it reflects the record stored at
// mailbox sequence seq (the Seq of the record [Client.Send] returned):
// outputs are published before the state is written, so a reader that saw an
// output and reads the state at once may see the state before that record.
// It waits until ctx ends, and fails with ErrTerminated when the effector is
// terminated before it applied seq, ErrNotFound when it does not exist.
func (c *Client) StateAt(ctx context.Context, ref records.Ref, seq uint64) (Document, error) {
	if err := ref.Validate(); err != nil {
		return Document{}, fmt.Errorf("state of %s: %w: %w", ref, ErrInvalid, err)
	}
	key := c.names.StateKey(ref)
	for ent, err := range c.states.of(key).Watch(ctx, key) {
		if err != nil {
			return Document{}, fmt.Errorf("state of %s: %w", ref, err)
		}
		doc := ent.Value
		if err := c.states.check("read", key, doc); err != nil {
			return Document{}, err
		}
		switch {
		case doc.applied(seq):
			return doc, nil
		case doc.Status == StatusTerminated:
			return doc, fmt.Errorf("state of %s at %d: %w", ref, seq, ErrTerminated)
		}
	}
	if err := ctx.Err(); err != nil {
		if _, gerr := c.states.Get(context.WithoutCancel(ctx), key); errors.Is(gerr, kv.ErrNotFound) {
			return Document{}, fmt.Errorf("state of %s: %w", ref, ErrNotFound)
		}
		return Document{}, fmt.Errorf("state of %s at %d: %w", ref, seq, err)
	}
	return Document{}, fmt.Errorf("state of %s at %d: the watch ended", ref, seq)
}

// SubscribeKind follows the records every effector of kind emits (their
// outboxes), from now on unless an option says otherwise; see
// [Client.Subscribe]. Each effector's records come in the order it emitted
// them. With stream groups (docs/layout.md) the kind's outboxes are in every
// group's outbox stream, followed together: records of effectors in
// different groups interleave as they arrive, and [FromSeq] is refused (a
// sequence is one stream's).
func (c *Client) SubscribeKind(ctx context.Context, kind string, opts ...SubscribeOption) (iter.Seq2[records.Record, error], error) {
	if err := records.ValidateKind(kind); err != nil {
		return nil, fmt.Errorf("subscribe to kind %q: %w: %w", kind, ErrInvalid, err)
	}
	msgs, err := c.followAll(ctx, c.names.OutboxStreams(), c.names.KindOutboxes(kind), opts)
	if err != nil {
		return nil, fmt.Errorf("subscribe to kind %s: %w", kind, err)
	}
	return recordsOf(msgs), nil
}

// followAll is [Client.follow] of subject in each of streams at once (a
// kind's outboxes in every stream group's outbox stream): the consumers
// exist when it returns; ranging over the result merges their messages as
// they arrive, each stream's in its order, until ctx ends, the loop breaks
// or a stream fails (its error is yielded once and ends it).
func (c *Client) followAll(ctx context.Context, streams []string, subject string, opts []SubscribeOption) (iter.Seq2[jetstream.Msg, error], error) {
	if len(streams) == 1 {
		return c.follow(ctx, streams[0], subject, opts)
	}
	var from subscribeFrom
	for _, opt := range opts {
		if opt != nil {
			opt(&from)
		}
	}
	if from.seq > 0 {
		return nil, invalidf("FromSeq(%d): the deployment has %d stream groups, so %s is read from %d streams, each with sequences of its own: use FromStart, or subscribe to one effector", from.seq, len(streams), subject, len(streams))
	}
	// The followers stop when ctx ends or when the merged loop ends,
	// whichever is first (stop).
	fctx, stop := context.WithCancel(ctx)
	each := make([]iter.Seq2[jetstream.Msg, error], len(streams))
	for i, stream := range streams {
		msgs, err := c.follow(fctx, stream, subject, opts)
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
