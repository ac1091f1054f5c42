package actor

import (
	"context"
	"errors"
	"fmt"

	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
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
