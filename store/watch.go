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
	kv, err := c.conn.JetStream().KeyValue(ctx, bucket)
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

// watchBuckets is watchBucket over several buckets at once (a kind's state
// documents in every stream group's bucket): one feed whose events are each
// bucket's in their order, the buckets' interleaved as they arrive. Bucket
// i starts at revision froms[i] (0: its current values, then changes; a
// revision is one bucket's). The feed ends when ctx ends, Stop is called,
// or one bucket's watch ends (with its error).
func watchBuckets[E any](ctx context.Context, c *Client, buckets []string, key string, froms []uint64, event func(jetstream.KeyValueEntry) (E, error)) (*feed[E], error) {
	if len(buckets) == 1 {
		return watchBucket(ctx, c, buckets[0], key, froms[0], event)
	}
	wctx, cancel := context.WithCancel(ctx)
	var each []*feed[E]
	for i, b := range buckets {
		f, err := watchBucket(wctx, c, b, key, froms[i], event)
		if err != nil {
			cancel()
			for _, f := range each {
				f.Stop()
			}
			return nil, err
		}
		each = append(each, f)
	}
	merged := &feed[E]{events: make(chan E, 64), stop: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, f := range each {
		wg.Go(func() {
			defer cancel() // one bucket's watch ended: end them all
			for ev := range f.events {
				select {
				case merged.events <- ev:
				case <-wctx.Done():
					f.Stop()
					return
				}
			}
			if err := f.Err(); err != nil {
				merged.mu.Lock()
				if merged.err == nil {
					merged.err = err
				}
				merged.mu.Unlock()
			}
		})
	}
	go func() {
		wg.Wait()
		for _, f := range each {
			f.Stop()
		}
		close(merged.events)
		close(merged.done)
	}()
	return merged, nil
}

// pageLatest reads a page of a KV bucket's current values in the order they
// were last written: the messages of stream matching filter after sequence
// from, keeping those that are the latest revision of their key (not a
// deletion) and that keep accepts, up to limit. It examines at most maxScan
// messages. pos is the sequence to resume after (the cursor's); more says
// whether a next page may hold more.
func pageLatest[T any](ctx context.Context, c *Client, stream, filter string, from uint64, limit int, keep func(m stored) (T, bool)) (items []T, pos uint64, more bool, err error) {
	pos = from
	examined := 0
	for len(items) < limit && examined < maxScan {
		got, pending, err := c.direct.batch(ctx, stream, filter, pos+1, nil, min(1000, 2*(limit-len(items))+8))
		if err != nil {
			return nil, 0, false, c.wrap(stream, err)
		}
		refs := make([]getRef, len(got))
		for i, m := range got {
			refs[i] = getRef{stream: stream, last: m.subject}
		}
		latest, err := c.direct.get(ctx, refs)
		if err != nil {
			return nil, 0, false, err
		}
		full := false
		for i, m := range got {
			examined++
			pos = m.seq
			if latest[i].seq != m.seq || m.header.Get("KV-Operation") != "" {
				continue // an older revision, or a deletion
			}
			if v, ok := keep(m); ok {
				items = append(items, v)
				if len(items) == limit {
					full = true
					break
				}
			}
		}
		if full {
			return items, pos, pending > 0 || len(got) > 0 && pos != got[len(got)-1].seq, nil
		}
		if len(got) == 0 || pending == 0 {
			break
		}
		if examined >= maxScan {
			more = true
		}
	}
	return items, pos, more, nil
}
