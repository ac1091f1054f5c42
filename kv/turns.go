package kv

import (
	"context"
	"sync"
)

// keyTurns makes the callers of one key take turns, the others waiting
// until the holder releases it or their context is done. The zero value is
// ready; it holds only the keys in use.
type keyTurns struct {
	mu   sync.Mutex
	keys map[string]*turn
}

// turn is the slot of one key: a one-element semaphore and the number of
// callers holding or waiting for it.
type turn struct {
	slot  chan struct{}
	users int
}

// acquire waits for key's turn. On error (ctx done) the caller must not
// call release.
func (k *keyTurns) acquire(ctx context.Context, key string) error {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = make(map[string]*turn)
	}
	t := k.keys[key]
	if t == nil {
		t = &turn{slot: make(chan struct{}, 1)}
		k.keys[key] = t
	}
	t.users++
	k.mu.Unlock()

	select {
	case t.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		k.leave(key, t)
		return ctx.Err()
	}
}

// release ends the caller's turn on key.
func (k *keyTurns) release(key string) {
	k.mu.Lock()
	t := k.keys[key]
	k.mu.Unlock()
	<-t.slot
	k.leave(key, t)
}

// leave drops one user of t, forgetting key when none is left.
func (k *keyTurns) leave(key string, t *turn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(k.keys, key)
	}
}
