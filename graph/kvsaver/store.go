package kvsaver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
)

// StoreConfig configures a Store. The zero value is valid: the
// deployment's orchestration bucket, prefix "store", no embeddings.
type StoreConfig struct {
	// Bucket is the KV bucket (default conn.Names().OrchBucket(), ea_orch);
	// another bucket is created when missing.
	Bucket string
	// Prefix is the first token of every key (default "store").
	Prefix string
	// Embed, when set, embeds each value on Put and the query of a Search,
	// for semantic search (e.g. core/llm's Provider.Embed).
	Embed graph.Embedder
}

// Store is a graph.Store on JetStream KV: long-term memory that outlives
// processes and threads. An item is the key <prefix>.<namespace
// tokens>.<key> holding the item (value, embedding, times) as msgpack. A
// Search lists the keys under the namespace prefix and reads each item: it
// costs one round trip per item, and semantic search compares the query
// with every item's stored embedding (no index; keep namespaces small or
// search a narrow prefix). Safe for concurrent use.
type Store struct {
	store  *kv.Store[graph.Item]
	prefix string
	embed  graph.Embedder
	now    func() time.Time
}

var _ graph.Store = (*Store)(nil)

// NewStore returns a Store on conn's JetStream.
func NewStore(ctx context.Context, conn *bus.Conn, cfg StoreConfig) (*Store, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: kvsaver: nil connection", graph.ErrInvalidArgument)
	}
	if cfg.Prefix != "" && !prefixRE.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("%w: kvsaver: store prefix %q: use one token of 1-64 letters, digits, - or _", graph.ErrInvalidArgument, cfg.Prefix)
	}
	if cfg.Bucket == "" {
		cfg.Bucket = conn.Names().OrchBucket()
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "store"
	}
	b, err := conn.JetStream().KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		b, err = conn.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: cfg.Bucket, Description: "graph store", Storage: jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			b, err = conn.JetStream().KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kvsaver: open bucket %s: %w", cfg.Bucket, err)
	}
	return &Store{store: kv.New[graph.Item](b), prefix: cfg.Prefix, embed: cfg.Embed, now: time.Now}, nil
}

func (s *Store) key(ns []string, key string) string {
	return s.prefix + "." + strings.Join(ns, ".") + "." + key
}

// Put implements graph.Store.
func (s *Store) Put(ctx context.Context, ns []string, key string, value any) error {
	if err := graph.CheckItemPath(ns, key, false); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: store: empty key", graph.ErrInvalidArgument)
	}
	b, err := codec.Marshal(value)
	if err != nil {
		return fmt.Errorf("%w: store: encode the value %T: %v", graph.ErrInvalidArgument, value, err)
	}
	now := s.now()
	it := graph.Item{Namespace: slices.Clone(ns), Key: key, Value: b, Created: now, Updated: now}
	if s.embed != nil {
		text, err := graph.ItemText(value)
		if err != nil {
			return err
		}
		vs, err := s.embed(ctx, []string{text})
		if err != nil {
			return fmt.Errorf("kvsaver: store: embed %s: %w", s.key(ns, key), err)
		}
		if len(vs) == 1 {
			it.Vector = vs[0]
		}
	}
	if old, err := s.store.Get(ctx, s.key(ns, key)); err == nil {
		it.Created = old.Value.Created
	}
	if _, err := s.store.Put(ctx, s.key(ns, key), it); err != nil {
		return fmt.Errorf("kvsaver: store: put %s: %w", s.key(ns, key), err)
	}
	return nil
}

// Get implements graph.Store.
func (s *Store) Get(ctx context.Context, ns []string, key string) (graph.Item, error) {
	if err := graph.CheckItemPath(ns, key, false); err != nil {
		return graph.Item{}, err
	}
	e, err := s.store.Get(ctx, s.key(ns, key))
	if errors.Is(err, kv.ErrNotFound) {
		return graph.Item{}, fmt.Errorf("%w: store item %s", graph.ErrNotFound, s.key(ns, key))
	}
	if err != nil {
		return graph.Item{}, fmt.Errorf("kvsaver: store: get %s: %w", s.key(ns, key), err)
	}
	return e.Value, nil
}

// Delete implements graph.Store.
func (s *Store) Delete(ctx context.Context, ns []string, key string) error {
	if err := graph.CheckItemPath(ns, key, false); err != nil {
		return err
	}
	if err := s.store.Delete(ctx, s.key(ns, key)); err != nil && !errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("kvsaver: store: delete %s: %w", s.key(ns, key), err)
	}
	return nil
}

// Search implements graph.Store.
func (s *Store) Search(ctx context.Context, prefix []string, opts graph.SearchOptions) ([]graph.Item, error) {
	if err := graph.CheckItemPath(prefix, "", true); err != nil {
		return nil, err
	}
	var qv []float32
	if opts.Query != "" {
		if s.embed == nil {
			return nil, fmt.Errorf("%w: store: a search query needs StoreConfig.Embed", graph.ErrNotSupported)
		}
		vs, err := s.embed(ctx, []string{opts.Query})
		if err != nil {
			return nil, fmt.Errorf("kvsaver: store: embed the query: %w", err)
		}
		if len(vs) == 1 {
			qv = vs[0]
		}
	}
	filter := s.prefix + ".>"
	if len(prefix) > 0 {
		filter = s.prefix + "." + strings.Join(prefix, ".") + ".>"
	}
	keys, err := s.store.Keys(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("kvsaver: store: list %s: %w", filter, err)
	}
	items := make([]graph.Item, 0, len(keys))
	for _, k := range keys {
		e, err := s.store.Get(ctx, k)
		if errors.Is(err, kv.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("kvsaver: store: get %s: %w", k, err)
		}
		items = append(items, e.Value)
	}
	return graph.RankItems(items, opts.Query != "", qv, opts.Limit), nil
}
