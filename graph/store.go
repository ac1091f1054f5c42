package graph

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/internal/codec"
)

// Store is long-term memory shared across threads (LangGraph's Store):
// items under a namespace (a path such as {"users", "u1", "memories"}) and a
// key. Nodes reach the graph's store with StoreOf. Implementations:
// MemoryStore and the JetStream KV store of graph/kvsaver; both pass
// graphtest.RunStore.
//
// Contract:
//   - Namespace tokens and keys are 1–128 of [A-Za-z0-9_-]; a namespace has
//     at least one token. Anything else is ErrInvalidArgument.
//   - Put stores value (typed msgpack) under ns/key, replacing what was
//     there; with an Embedder configured it also stores the embedding of
//     the value's text (the value itself when it is a string, its JSON
//     otherwise).
//   - Get returns the item or ErrNotFound; Delete removes it (no error when
//     absent).
//   - Search returns the items whose namespace starts with prefix (all
//     items for an empty prefix), at most Limit (0: all). Without a Query
//     they come in namespace then key order; with a Query and an Embedder,
//     by decreasing similarity of their embedding to the query's (Score),
//     and without an Embedder a Query is ErrNotSupported.
//   - All methods are safe for concurrent use.
type Store interface {
	Put(ctx context.Context, ns []string, key string, value any) error
	Get(ctx context.Context, ns []string, key string) (Item, error)
	Delete(ctx context.Context, ns []string, key string) error
	Search(ctx context.Context, prefix []string, opts SearchOptions) ([]Item, error)
}

// Item is one entry of a Store.
type Item struct {
	Namespace []string  `json:"ns"`
	Key       string    `json:"key"`
	Value     []byte    `json:"value"` // msgpack; see Decode
	Vector    []float32 `json:"vector,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	// Score is the similarity to the query of a Search (cosine, -1 to 1);
	// 0 otherwise. Not stored.
	Score float64 `json:"-"`
}

// Decode decodes the item's value into v (a pointer).
func (i Item) Decode(v any) error {
	if err := codec.Unmarshal(i.Value, v); err != nil {
		return fmt.Errorf("graph: decode store item %s/%s: %w", strings.Join(i.Namespace, "/"), i.Key, err)
	}
	return nil
}

// SearchOptions narrows a Store.Search.
type SearchOptions struct {
	Query string // semantic search (needs an Embedder)
	Limit int    // at most this many items (0: all)
}

// Embedder turns texts into vectors, e.g. core/llm's Provider.Embed.
type Embedder func(ctx context.Context, texts []string) ([][]float32, error)

// WithStore gives the graph's nodes the long-term memory s (StoreOf).
// Subgraphs compiled without a store use their parent's.
func WithStore(s Store) Option {
	return func(c *config) error {
		if s == nil {
			return invalidArg("WithStore: nil store")
		}
		c.store = s
		return nil
	}
}

// StoreOf returns the store of the graph running the node that ctx
// belongs to; false outside a node or when the graph has none.
func StoreOf(ctx context.Context) (Store, bool) {
	nc, ok := ctx.Value(nodeCtxKey{}).(*nodeCtx)
	if !ok || nc.store == nil {
		return nil, false
	}
	return nc.store, true
}

// CheckItemPath, ItemText, Cosine and RankItems are the rules of the Store
// contract as functions, for Store implementations (MemoryStore and
// kvsaver's use them).

// CheckItemPath reports a namespace or key a Store must refuse
// (ErrInvalidArgument); an empty key checks the namespace only, and
// allowEmpty accepts an empty namespace (a Search of everything).
func CheckItemPath(ns []string, key string, allowEmpty bool) error {
	if len(ns) == 0 && !allowEmpty {
		return invalidArg("store: empty namespace")
	}
	for _, t := range ns {
		if !nameRE.MatchString(t) {
			return invalidArg("store: namespace token %q: use 1-128 letters, digits, - or _", t)
		}
	}
	if key != "" && !nameRE.MatchString(key) {
		return invalidArg("store: key %q: use 1-128 letters, digits, - or _", key)
	}
	return nil
}

// ItemText is the text a Store embeds for value: the value itself when it
// is a string, its JSON otherwise.
func ItemText(value any) (string, error) {
	if s, ok := value.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return "", fmt.Errorf("graph: store: the value %T has no JSON form to embed: %w", value, err)
	}
	return string(b), nil
}

// Cosine is the cosine similarity of a and b (0 when either is zero or
// their lengths differ).
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// RankItems orders items for a Search: by Score when query is set (after
// filling it from qv), else by namespace and key; then cuts to limit.
func RankItems(items []Item, query bool, qv []float32, limit int) []Item {
	if query {
		for i := range items {
			items[i].Score = Cosine(qv, items[i].Vector)
		}
		slices.SortStableFunc(items, func(a, b Item) int { return cmp.Compare(b.Score, a.Score) })
	} else {
		slices.SortFunc(items, func(a, b Item) int {
			return cmp.Or(slices.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Key, b.Key))
		})
	}
	if limit > 0 && len(items) > limit {
		items = items[:limit]
	}
	return items
}

// MemoryStore is a Store in process memory.
type MemoryStore struct {
	embed Embedder
	now   func() time.Time

	mu    sync.Mutex
	items map[string]Item // by namespace and key joined with "/"
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore; embed (may be nil) enables
// semantic search.
func NewMemoryStore(embed Embedder) *MemoryStore {
	return &MemoryStore{embed: embed, now: time.Now, items: map[string]Item{}}
}

func itemPath(ns []string, key string) string {
	return strings.Join(append(slices.Clone(ns), key), "/")
}

// Put implements Store.
func (m *MemoryStore) Put(ctx context.Context, ns []string, key string, value any) error {
	if err := CheckItemPath(ns, key, false); err != nil {
		return err
	}
	if key == "" {
		return invalidArg("store: empty key")
	}
	b, err := codec.Marshal(value)
	if err != nil {
		return invalidArg("store: encode the value %T: %v", value, err)
	}
	it := Item{Namespace: slices.Clone(ns), Key: key, Value: b}
	if m.embed != nil {
		text, err := ItemText(value)
		if err != nil {
			return err
		}
		vs, err := m.embed(ctx, []string{text})
		if err != nil {
			return fmt.Errorf("graph: store: embed %s: %w", itemPath(ns, key), err)
		}
		if len(vs) == 1 {
			it.Vector = vs[0]
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	it.Created, it.Updated = now, now
	if old, ok := m.items[itemPath(ns, key)]; ok {
		it.Created = old.Created
	}
	m.items[itemPath(ns, key)] = it
	return nil
}

// Get implements Store.
func (m *MemoryStore) Get(ctx context.Context, ns []string, key string) (Item, error) {
	if err := CheckItemPath(ns, key, false); err != nil {
		return Item{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[itemPath(ns, key)]
	if !ok {
		return Item{}, fmt.Errorf("%w: store item %s", ErrNotFound, itemPath(ns, key))
	}
	return it, nil
}

// Delete implements Store.
func (m *MemoryStore) Delete(ctx context.Context, ns []string, key string) error {
	if err := CheckItemPath(ns, key, false); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, itemPath(ns, key))
	return nil
}

// Search implements Store.
func (m *MemoryStore) Search(ctx context.Context, prefix []string, opts SearchOptions) ([]Item, error) {
	if err := CheckItemPath(prefix, "", true); err != nil {
		return nil, err
	}
	var qv []float32
	if opts.Query != "" {
		if m.embed == nil {
			return nil, fmt.Errorf("%w: store: a search query needs an Embedder", ErrNotSupported)
		}
		vs, err := m.embed(ctx, []string{opts.Query})
		if err != nil {
			return nil, fmt.Errorf("graph: store: embed the query: %w", err)
		}
		if len(vs) == 1 {
			qv = vs[0]
		}
	}
	m.mu.Lock()
	var items []Item
	for _, it := range m.items {
		if len(it.Namespace) >= len(prefix) && slices.Equal(it.Namespace[:len(prefix)], prefix) {
			items = append(items, it)
		}
	}
	m.mu.Unlock()
	return RankItems(items, opts.Query != "", qv, opts.Limit), nil
}
