package kv

import (
	"context"
	"errors"
	"iter"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// errWatchClosed is yielded when the watcher's subscription ends under the
// iterator, which happens when the connection is closed.
var errWatchClosed = errors.New("watcher closed (is the connection closed?)")

// Watch yields the current value of every key matching pattern (keys deleted
// before the watch are left out), then every change to them as it happens,
// in revision order; a delete or purge is yielded as an [Entry] with Deleted
// set and the zero value. pattern is a key or may use NATS wildcards: * for
// one token ("counter.*"), > for the rest ("orders.>"); ">" alone watches the
// whole bucket.
//
// The iteration ends without an error when ctx is done or the loop breaks; the
// watcher is then released, with no goroutine left behind. An invalid pattern
// or a failure to start the watch is yielded once as an error, and the
// iteration ends. A value that does not decode into T is yielded with a
// [*DecodeError] (and the entry's key and revision); the watch goes on if the
// loop does. Each iteration starts its own watcher on the server.
//
// A slow loop body holds up delivery: changes queue in the client meanwhile.
func (s *Store[T]) Watch(ctx context.Context, pattern string) iter.Seq2[Entry[T], error] {
	return func(yield func(Entry[T], error) bool) {
		if err := validatePattern(pattern); err != nil {
			yield(Entry[T]{}, s.fail("watch", pattern, err))
			return
		}
		w, err := s.kv.Watch(ctx, pattern)
		if err != nil {
			if ctx.Err() == nil {
				yield(Entry[T]{}, s.fail("watch", pattern, err))
			}
			return
		}
		defer release(w)
		live := false // past the initial values
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				switch {
				case !ok: // the client closes the watcher when ctx is done, too
					if ctx.Err() == nil {
						yield(Entry[T]{}, s.fail("watch", pattern, errWatchClosed))
					}
					return
				case e == nil: // the marker after the initial values
					live = true
					continue
				case !live && e.Operation() != jetstream.KeyValuePut:
					continue // a key deleted before the watch has no current value
				}
				ent, err := s.entry(e)
				if err != nil {
					err = s.fail("watch", pattern, err)
				}
				if !yield(ent, err) {
					return
				}
			}
		}
	}
}

// History returns every revision of key the bucket still keeps, oldest first,
// delete and purge markers included (as entries with Deleted set). A bucket
// keeps as many revisions per key as its History setting, at most 64; a purge
// drops all but the purge marker. It returns [ErrNotFound] when the key has
// no revision at all, and a [*DecodeError] when a kept value does not decode
// into T.
func (s *Store[T]) History(ctx context.Context, key string) ([]Entry[T], error) {
	if err := validateKey(key); err != nil {
		return nil, s.fail("history", key, err)
	}
	var entries []Entry[T]
	err := s.initial(ctx, key, func(e jetstream.KeyValueEntry) error {
		ent, err := s.entry(e)
		entries = append(entries, ent)
		return err
	}, jetstream.IncludeHistory())
	if err != nil {
		return nil, s.fail("history", key, err)
	}
	if len(entries) == 0 {
		return nil, s.fail("history", key, ErrNotFound)
	}
	return entries, nil
}

// Keys returns the sorted keys that have a value (deleted keys are left out)
// and match filter: a key or pattern as for [Store.Watch], or "" for every
// key. It returns an empty slice, not an error, when no key matches.
func (s *Store[T]) Keys(ctx context.Context, filter string) ([]string, error) {
	pattern := filter
	if pattern == "" {
		pattern = jetstream.AllKeys
	}
	if err := validatePattern(pattern); err != nil {
		return nil, s.fail("keys", filter, err)
	}
	keys := []string{}
	err := s.initial(ctx, pattern, func(e jetstream.KeyValueEntry) error {
		keys = append(keys, e.Key())
		return nil
	}, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, s.fail("keys", filter, err)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// initial watches pattern with opts and passes each entry to fn until the
// watcher reports that it has delivered the initial values, then releases it.
func (s *Store[T]) initial(ctx context.Context, pattern string, fn func(jetstream.KeyValueEntry) error, opts ...jetstream.WatchOpt) error {
	w, err := s.kv.Watch(ctx, pattern, opts...)
	if err != nil {
		return err
	}
	defer release(w)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			switch {
			case !ok: // the client closes the watcher when ctx is done, too
				if err := ctx.Err(); err != nil {
					return err
				}
				return errWatchClosed
			case e == nil:
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// release stops w and drains its channel until the client closes it. The
// client's delivery goroutine blocks on a full channel, so without the drain a
// watcher abandoned mid-stream would leave it blocked forever.
func release(w jetstream.KeyWatcher) {
	_ = w.Stop() // fails only when already stopped; the drain below still ends
	for range w.Updates() {
	}
}
