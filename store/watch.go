package store

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// feed follows the keys of a KV bucket that match a filter, from a resume
// revision, turning each change into an event E. [Watcher] (state
// documents) and [OrchWatcher] (orchestrations) are feeds.
type feed[E any] struct {
	events chan E
	stop   context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex // guards err
	err    error
}

// Events delivers the changes in order. It is closed when the watcher stops
// (see Err).
func (f *feed[E]) Events() <-chan E { return f.events }

// Stop stops the watcher and waits for it to end.
func (f *feed[E]) Stop() {
	f.stop()
	<-f.done
}

// Err returns why the watcher ended early (a value that could not be
// decoded), or nil.
func (f *feed[E]) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// watchBucket starts a feed of bucket's keys matching key from revision
// from (0: the current values, then changes). event turns an entry into an
// event; an error from it ends the feed with that error.
func watchBucket[E any](ctx context.Context, c *Client, bucket, key string, from uint64, event func(jetstream.KeyValueEntry) (E, error)) (*feed[E], error) {
	kv, err := c.conn.JS.KeyValue(ctx, bucket)
	if err != nil {
		return nil, unavailable(bucket, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var opts []jetstream.WatchOpt
	if from > 0 {
		opts = append(opts, jetstream.ResumeFromRevision(from))
	}
	kw, err := kv.Watch(wctx, key, opts...)
	if err != nil {
		cancel()
		return nil, unavailable(bucket, err)
	}
	f := &feed[E]{events: make(chan E, 64), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer close(f.events)
		defer func() { _ = kw.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			var ok bool
			select {
			case <-wctx.Done():
				return
			case e, ok = <-kw.Updates():
				if !ok {
					return
				}
			}
			if e == nil {
				continue // end of the initial values
			}
			ev, err := event(e)
			if err != nil {
				f.mu.Lock()
				f.err = err
				f.mu.Unlock()
				return
			}
			select {
			case f.events <- ev:
			case <-wctx.Done():
				return
			}
		}
	}()
	return f, nil
}
