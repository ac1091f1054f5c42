package kvsaver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/kv"
)

// CacheConfig configures a Cache. The zero value is valid: the
// deployment's orchestration bucket, prefix "cache".
type CacheConfig struct {
	// Bucket is the KV bucket (default conn.Names().OrchBucket(), ea_orch);
	// another bucket is created when missing.
	Bucket string
	// Prefix is the first token of every key (default "cache").
	Prefix string
}

// Cache is a graph.Cache on JetStream KV: cached node updates survive the
// process and are shared by every process using the same bucket and
// prefix. An entry is the key <prefix>.<node>.<hash> holding the update
// and its expiry time; an expired entry reads as missing (and is
// overwritten by the next Put). Safe for concurrent use.
type Cache struct {
	store  *kv.Store[cacheEntry]
	prefix string
	now    func() time.Time
}

type cacheEntry struct {
	Value   []byte    `json:"value"`
	Expires time.Time `json:"expires"`
}

var _ graph.Cache = (*Cache)(nil)

// NewCache returns a Cache on conn's JetStream.
func NewCache(ctx context.Context, conn *bus.Conn, cfg CacheConfig) (*Cache, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: kvsaver: nil connection", graph.ErrInvalidArgument)
	}
	if cfg.Prefix != "" && !prefixRE.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("%w: kvsaver: cache prefix %q: use one token of 1-64 letters, digits, - or _", graph.ErrInvalidArgument, cfg.Prefix)
	}
	if cfg.Bucket == "" {
		cfg.Bucket = conn.Names().OrchBucket()
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "cache"
	}
	b, err := conn.JetStream().KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		b, err = conn.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: cfg.Bucket, Description: "graph node cache", Storage: jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			b, err = conn.JetStream().KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kvsaver: open bucket %s: %w", cfg.Bucket, err)
	}
	return &Cache{store: kv.New[cacheEntry](b), prefix: cfg.Prefix, now: time.Now}, nil
}

// Get implements graph.Cache.
func (c *Cache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	e, err := c.store.Get(ctx, c.prefix+"."+key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !e.Value.Expires.IsZero() && !c.now().Before(e.Value.Expires) {
		return nil, false, nil
	}
	return e.Value.Value, true, nil
}

// Put implements graph.Cache.
func (c *Cache) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	e := cacheEntry{Value: value}
	if ttl > 0 {
		e.Expires = c.now().Add(ttl)
	}
	_, err := c.store.Put(ctx, c.prefix+"."+key, e)
	return err
}
