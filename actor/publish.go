package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishNow publishes a record logic streams with Context.EmitNow.
func (e *effector) publishNow(o output) error {
	if err := e.fence(); err != nil {
		return err
	}
	_, err := e.node.pub.PublishMsg(e.ctx, o.message())
	return publishFailure(wrapPublish(o.subject, err))
}

// publish publishes outputs: stream subjects through JetStream (durable, and
// de-duplicated by record id), others as plain NATS messages. Several are
// published asynchronously on the node's own JetStream context, and all
// their acknowledgements awaited; when its window of unacknowledged
// publishes is full, publish waits for the ones in flight before going on.
func (e *effector) publish(outs []output) error {
	if len(outs) == 1 && outs[0].stream {
		if err := e.fence(); err != nil {
			return err
		}
		_, err := e.node.pub.PublishMsg(e.ctx, outs[0].message())
		return wrapPublish(outs[0].subject, err)
	}
	dropped := e.node.conn.Dropped()
	acks, err := e.startPublish(outs)
	if err != nil {
		return err
	}
	return e.awaitPublish(acks, dropped)
}

// startPublish publishes outputs as publish does without awaiting the
// acknowledgements of those sent to streams: it returns them, for
// awaitPublish (a pipelined batch's finish awaits them later). It awaits
// some only when the window of unacknowledged publishes is full.
func (e *effector) startPublish(outs []output) ([]jetstream.PubAckFuture, error) {
	if len(outs) == 0 {
		return nil, nil
	}
	if err := e.fence(); err != nil {
		return nil, err
	}
	js, nc := e.node.js, e.node.conn.NATS()
	var acks []jetstream.PubAckFuture
	// Outputs sent over one connection are stored in order, up to the
	// first one lost with it. One sent after the connection dropped could
	// be stored before an earlier one that was lost: stop, and let the
	// caller publish them all again, in order (their ids make the server
	// keep each once).
	dropped := e.node.conn.Dropped()
	for _, o := range outs {
		if isDropped(dropped) {
			return nil, wrapPublish(o.subject, bus.ErrAckLost)
		}
		msg := o.message()
		if !o.stream {
			if err := nc.PublishMsg(msg); err != nil {
				return nil, wrapPublish(o.subject, err)
			}
			continue
		}
		f, err := js.PublishMsgAsync(msg)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			if err := e.awaitPublish(acks, dropped); err != nil {
				return nil, err
			}
			acks = acks[:0]
			f, err = js.PublishMsgAsync(msg)
		}
		if err != nil {
			return nil, wrapPublish(o.subject, err)
		}
		acks = append(acks, f)
	}
	return acks, nil
}

// isDropped reports whether the connection dropped since ch, a
// bus.Conn.Dropped channel, was taken.
func isDropped(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// awaitPublish awaits the acknowledgements startPublish returned: nil once
// all are stored, the first failure otherwise. dropped is the connection's
// Dropped channel from before they were sent: when it closes first, an
// acknowledgement still awaited may never come (bus.ErrAckLost), and the
// caller publishes again at once rather than after the async timeout.
func (e *effector) awaitPublish(acks []jetstream.PubAckFuture, dropped <-chan struct{}) error {
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return wrapPublish(f.Msg().Subject, err)
		case <-dropped:
			select {
			case <-f.Ok():
				continue
			default:
			}
			return wrapPublish(f.Msg().Subject, bus.ErrAckLost)
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
	}
	return nil
}

func wrapPublish(subject string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("publish to %s: %w", subject, err)
}

// deadLetter publishes the record to the effector's dead letters with the
// reason in EA-Error and EA-Dead-Reason (see Node.deadLetter).
func (e *effector) deadLetter(d delivery, reason string, failure error) error {
	if err := e.fence(); err != nil {
		return err
	}
	return e.node.deadLetter(e.ctx, e.node.names.Dead(e.ref), stored{
		stream: e.node.names.MailboxStreamFor(e.ref), subject: d.msg.Subject(), seq: d.seq,
		header: d.msg.Headers(), data: d.msg.Data(),
	}, reason, failure)
}

// retryIO runs op until it succeeds, backing off while NATS is unreachable.
// It gives up when the effector stops, returning errAbandon: the record in
// hand stays unacknowledged and is redelivered later; and at once, returning
// the error, when the write can never succeed (bus.Unpublishable).
//
// A timeout means a server too busy to answer in time rather than one out of
// reach: retrying at once would only add to its load, so the first wait is
// longer. The waits double up to retryIOMax. The first failure of an
// operation is logged as a warning, later ones at debug level.
func (e *effector) retryIO(op func() error) error {
	wait := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil {
			if attempt > 0 {
				e.logger().Debug("NATS answered again", "attempts", attempt+1)
			}
			return nil
		}
		if e.ctx.Err() != nil || errors.Is(err, errAbandon) {
			return errAbandon // stopping (fence gave the record up)
		}
		if unpublishable(err) {
			return err // can never succeed: not a NATS outage
		}
		if attempt == 0 && isTimeout(err) {
			wait = 250 * time.Millisecond
		}
		level := slog.LevelWarn
		if attempt > 0 {
			level = slog.LevelDebug
		}
		e.logger().Log(e.ctx, level, "NATS write failed; retrying", "err", err, "in", wait)
		if !sleep(e.ctx, wait) {
			return errAbandon
		}
		wait = min(2*wait, retryIOMax)
	}
}

// retryIOMax bounds the wait between two attempts of a write: half a second,
// so that a write that failed all through a server's restart or an election
// is tried again within half a second of the cluster answering (with 2 s,
// writes that failed a few times while a server stopped waited up to 2 s
// after their nodes had reconnected). A write's retries are one request
// each, and a node has a bounded number of records in hand.
const retryIOMax = 500 * time.Millisecond

// ackTimeout is how long a node waits for JetStream's acknowledgement of a
// write (an output, a state document, a dead letter) before it sends the
// write again. A write sent to a stream leader as that server stopped gets
// no answer at all, and no error: with nats.go's 5 s default, counters
// waited 3 s past the election after a server's restart in the cluster
// torture runs. An answer takes milliseconds when the stream has a leader;
// a write sent again is harmless (outputs carry ids the duplicate window
// drops, a state document's compare-and-set finds its own write: landed).
const ackTimeout = 2 * time.Second

// isTimeout reports whether err is a request that got no answer in time.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrAsyncPublishTimeout)
}

// sleep waits for d or until ctx ends, reporting whether it waited fully.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// outputFailure returns the dead-letter reason and the failure for outputs
// that can never be published: too large for the server (output_too_large),
// or refused for good otherwise (rejected). The record that made them then
// goes to dead letters instead of blocking its mailbox; outputs published
// before the refused one stay published. The reason is empty for any other
// error (the effector stopped).
func outputFailure(err error) (reason string, failure error) {
	switch {
	case bus.TooLarge(err):
		return reasonOutputTooLarge, fmt.Errorf("an output cannot be published: %w", err)
	case unpublishable(err):
		return reasonRejected, fmt.Errorf("an output cannot be published: %w", err)
	}
	return "", nil
}

// unpublishable ends retryIO's retries: the write can never succeed as it is,
// so retrying it as if NATS were down would block the mailbox for good.
func unpublishable(err error) bool { return bus.Unpublishable(err) && !errors.Is(err, errAbandon) }
