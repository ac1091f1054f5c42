package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/effectors/effectors/internal/codec"
)

// CachePolicy caches a node's update by a key of its input (LangGraph's
// CachePolicy): a later run of the node whose input has the same key, within
// TTL, reuses the update (its writes, Goto and Sends) without running the
// node. Give it to a node with WithCachePolicy; the graph's Cache
// (WithCache, else one in memory) holds the entries. Cache only nodes
// without side effects: a hit does not run the node at all.
type CachePolicy struct {
	// Key returns the cache key of the node's input (the state, or a Send's
	// payload). Default: a hash of the input's msgpack encoding.
	Key func(input any) string
	// TTL is how long an entry is used (0: until the cache drops it).
	TTL time.Duration
}

// WithCachePolicy caches the node's updates under p.
func WithCachePolicy(p CachePolicy) NodeOption {
	return func(o *nodeOpts) error {
		if p.TTL < 0 {
			return invalidArg("cache policy: negative TTL %s", p.TTL)
		}
		o.cache = &p
		return nil
	}
}

// Cache stores the cached updates of nodes (see CachePolicy):
// implementations are MemoryCache and the JetStream KV cache of
// graph/kvsaver. Get returns false for a missing or expired entry; Put
// stores value under key for ttl (0: no expiry). Keys are made of
// letters, digits, -, _ and . only. Both are safe for concurrent use. An
// error of either is logged and the node runs as if uncached.
type Cache interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Put(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

// WithCache makes the graph keep the cached updates of its nodes (those
// with WithCachePolicy) in c; without it they are kept in a MemoryCache of
// the compiled graph.
func WithCache(c Cache) Option {
	return func(cfg *config) error {
		if c == nil {
			return invalidArg("WithCache: nil cache")
		}
		cfg.cache = c
		return nil
	}
}

// MemoryCache is a Cache in process memory. Expired entries are dropped
// when read.
type MemoryCache struct {
	mu      sync.Mutex
	entries map[string]memEntry
	now     func() time.Time
}

type memEntry struct {
	value   []byte
	expires time.Time // zero: never
}

var _ Cache = (*MemoryCache)(nil)

// NewMemoryCache returns an empty MemoryCache.
func NewMemoryCache() *MemoryCache {
	return &MemoryCache{entries: map[string]memEntry{}, now: time.Now}
}

// Get implements Cache.
func (m *MemoryCache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return nil, false, nil
	}
	if !e.expires.IsZero() && !m.now().Before(e.expires) {
		delete(m.entries, key)
		return nil, false, nil
	}
	return e.value, true, nil
}

// Put implements Cache.
func (m *MemoryCache) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e := memEntry{value: value}
	if ttl > 0 {
		e.expires = m.now().Add(ttl)
	}
	m.mu.Lock()
	m.entries[key] = e
	m.mu.Unlock()
	return nil
}

// cacheKey is the Cache key of a node's input: <node>.<hash>.
func cacheKey(node string, p *CachePolicy, input any) (string, error) {
	var k string
	if p.Key != nil {
		k = p.Key(input)
	} else {
		b, err := codec.Marshal(input)
		if err != nil {
			return "", err
		}
		k = string(b)
	}
	sum := sha256.Sum256([]byte(k))
	return node + "." + hex.EncodeToString(sum[:16]), nil
}

// cached returns the cached update of t, if any.
func (g *Graph[S]) cached(ctx context.Context, t *task[S], input any) (key string, upd Update[S], hit bool) {
	p := t.spec.cache
	if p == nil || g.cfg.cache == nil {
		return "", upd, false
	}
	key, err := cacheKey(t.Node, p, input)
	if err != nil {
		g.cfg.logger.Warn("graph: node cache key", "node", t.Node, "err", err)
		return "", upd, false
	}
	b, ok, err := g.cfg.cache.Get(ctx, key)
	if err != nil {
		g.cfg.logger.Warn("graph: node cache get", "node", t.Node, "err", err)
	}
	if !ok || err != nil {
		return key, upd, false
	}
	var w PendingWrite
	if err := codec.Unmarshal(b, &w); err != nil {
		g.cfg.logger.Warn("graph: node cache entry does not decode", "node", t.Node, "err", err)
		return key, upd, false
	}
	if upd, err = g.decodeWrite(w); err != nil {
		g.cfg.logger.Warn("graph: node cache entry does not decode", "node", t.Node, "err", err)
		return key, upd, false
	}
	return key, upd, true
}

// cache stores t's update under key.
func (g *Graph[S]) cache(ctx context.Context, t *task[S], key string, upd Update[S]) {
	w, err := g.encodeWrite(t, upd)
	if err == nil {
		var b []byte
		if b, err = codec.Marshal(w); err == nil {
			err = g.cfg.cache.Put(ctx, key, b, t.spec.cache.TTL)
		}
	}
	if err != nil {
		g.cfg.logger.Warn("graph: node cache put", "node", t.Node, "err", err)
	}
}
