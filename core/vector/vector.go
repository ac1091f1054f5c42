package vector

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
)

// Embedder turns texts into vectors; a core.LLM is one.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Config configures a Store.
type Config struct {
	// Bucket is the KV bucket; default <prefix>_vectors.
	Bucket string
	// Collection groups documents, [A-Za-z0-9_-]{1,128}; default "default".
	Collection string
}

type entry struct {
	Doc    core.Doc  `json:"doc"`
	Vector []float32 `json:"vector"`
}

// Store is a durable vector store; it implements core.Vector.
type Store struct {
	st         *kv.Store[entry]
	emb        Embedder
	collection string
}

var _ core.Vector = (*Store)(nil)

// Open opens (creating if needed) the store's bucket on conn.
func Open(ctx context.Context, conn *bus.Conn, emb Embedder, cfg Config) (*Store, error) {
	const op = "vector.open"
	if conn == nil || emb == nil {
		return nil, core.Errorf(core.CodeInvalid, op, "needs a connection and an embedder")
	}
	if cfg.Bucket == "" {
		cfg.Bucket = conn.Names().VectorBucket()
	}
	if cfg.Collection == "" {
		cfg.Collection = "default"
	}
	if err := records.ValidateID(cfg.Collection); err != nil {
		return nil, core.Errorf(core.CodeInvalid, op, "collection: %w", err)
	}
	b, err := conn.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cfg.Bucket, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, core.Errorf(core.CodeUnavailable, op, "bucket %s: %w", cfg.Bucket, err)
	}
	return &Store{st: kv.New[entry](b), emb: emb, collection: cfg.Collection}, nil
}

// Add embeds docs and stores them, replacing docs with the same id. Ids are
// [A-Za-z0-9_-]{1,128}.
func (s *Store) Add(ctx context.Context, docs ...core.Doc) error {
	const op = "vector.add"
	if len(docs) == 0 {
		return nil
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		if err := records.ValidateID(d.ID); err != nil {
			return core.Errorf(core.CodeInvalid, op, "document id: %w", err)
		}
		texts[i] = d.Text
	}
	vecs, err := s.emb.Embed(ctx, texts)
	if err != nil {
		return err
	}
	if len(vecs) != len(docs) {
		return core.Errorf(core.CodeProvider, op, "got %d embeddings for %d documents", len(vecs), len(docs))
	}
	for i, d := range docs {
		if _, err := s.st.Put(ctx, s.collection+"."+d.ID, entry{Doc: d, Vector: vecs[i]}); err != nil {
			return core.Errorf(core.CodeUnavailable, op, "store %s: %w", d.ID, err)
		}
	}
	return nil
}

// Delete removes a document.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := records.ValidateID(id); err != nil {
		return core.Errorf(core.CodeInvalid, "vector.delete", "document id: %w", err)
	}
	if err := s.st.Delete(ctx, s.collection+"."+id); err != nil {
		return core.Errorf(core.CodeUnavailable, "vector.delete", "%s: %w", id, err)
	}
	return nil
}

// Search returns the k documents most similar to query, best first.
func (s *Store) Search(ctx context.Context, query string, k int) ([]core.Hit, error) {
	const op = "vector.search"
	if k < 1 {
		return nil, core.Errorf(core.CodeInvalid, op, "k must be at least 1, got %d", k)
	}
	qv, err := s.emb.Embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	if len(qv) != 1 {
		return nil, core.Errorf(core.CodeProvider, op, "got %d embeddings for one query", len(qv))
	}
	keys, err := s.st.Keys(ctx, s.collection+".*")
	if err != nil {
		return nil, core.Errorf(core.CodeUnavailable, op, "list: %w", err)
	}
	hits := make([]core.Hit, 0, len(keys))
	for _, key := range keys {
		e, err := s.st.Get(ctx, key)
		if err != nil {
			continue // deleted since listed
		}
		sim, err := Cosine(qv[0], e.Value.Vector)
		if err != nil {
			return nil, core.E(core.CodeInvalid, op, fmt.Errorf("document %s: %w", e.Value.Doc.ID, err))
		}
		hits = append(hits, core.Hit{Doc: e.Value.Doc, Score: sim})
	}
	slices.SortStableFunc(hits, func(a, b core.Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return hits[:min(k, len(hits))], nil
}

// Cosine returns the cosine similarity of a and b (0 when either is zero).
func Cosine(a, b []float32) (float64, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("vectors have %d and %d dimensions", len(a), len(b))
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0, nil
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb)), nil
}
