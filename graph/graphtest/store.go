package graphtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/graph"
)

// LetterEmbedder is a deterministic graph.Embedder for tests: a text's
// vector counts its letters a–z, so texts sharing letters are similar.
func LetterEmbedder(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 26)
		for _, r := range strings.ToLower(t) {
			if r >= 'a' && r <= 'z' {
				v[r-'a']++
			}
		}
		out[i] = v
	}
	return out, nil
}

// RunStore runs the conformance suite of graph.Store. newStore returns a
// fresh, empty store using embed for semantic search (nil: none); each
// subtest calls it once.
func RunStore(t *testing.T, newStore func(t *testing.T, embed graph.Embedder) graph.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore func(t *testing.T, embed graph.Embedder) graph.Store)
	}{
		{"PutGetDelete", testStorePutGet},
		{"SearchPrefix", testStoreSearch},
		{"SemanticSearch", testStoreSemantic},
		{"InvalidPaths", testStoreInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

func storeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type memo struct {
	Text string `json:"text"`
	N    int    `json:"n"`
}

func testStorePutGet(t *testing.T, newStore func(*testing.T, graph.Embedder) graph.Store) {
	s, ctx := newStore(t, nil), storeCtx(t)
	ns := []string{"users", "u1"}
	if _, err := s.Get(ctx, ns, "m1"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("Get of a missing item: %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, ns, "m1", memo{Text: "likes otters", N: 1}); err != nil {
		t.Fatal(err)
	}
	it, err := s.Get(ctx, ns, "m1")
	var m memo
	if err != nil || it.Decode(&m) != nil || m.Text != "likes otters" || it.Key != "m1" || !slices.Equal(it.Namespace, ns) || it.Created.IsZero() {
		t.Fatalf("Get: %+v (%+v), %v", it, m, err)
	}
	if err := s.Put(ctx, ns, "m1", memo{Text: "likes seals", N: 2}); err != nil {
		t.Fatal(err)
	}
	it2, err := s.Get(ctx, ns, "m1")
	if err != nil || it2.Decode(&m) != nil || m.N != 2 || it2.Updated.Before(it.Updated) {
		t.Fatalf("Get after a second Put: %+v, %v", it2, err)
	}
	if _, err := s.Get(ctx, []string{"users", "u2"}, "m1"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("another namespace: %v", err)
	}
	if err := s.Delete(ctx, ns, "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, ns, "m1"); !errors.Is(err, graph.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := s.Delete(ctx, ns, "m1"); err != nil {
		t.Fatalf("Delete of a missing item: %v", err)
	}
}

func testStoreSearch(t *testing.T, newStore func(*testing.T, graph.Embedder) graph.Store) {
	s, ctx := newStore(t, nil), storeCtx(t)
	for _, p := range []struct{ ns, key string }{{"users/u1", "b"}, {"users/u1", "a"}, {"users/u2", "a"}, {"teams/t1", "a"}, {"users/u1/deep", "z"}} {
		if err := s.Put(ctx, strings.Split(p.ns, "/"), p.key, p.ns+"/"+p.key); err != nil {
			t.Fatal(err)
		}
	}
	paths := func(items []graph.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, strings.Join(it.Namespace, "/")+"/"+it.Key)
		}
		return out
	}
	items, err := s.Search(ctx, []string{"users", "u1"}, graph.SearchOptions{})
	if want := []string{"users/u1/a", "users/u1/b", "users/u1/deep/z"}; err != nil || !slices.Equal(paths(items), want) {
		t.Fatalf("Search users/u1: %v, %v; want %v", paths(items), err, want)
	}
	items, err = s.Search(ctx, nil, graph.SearchOptions{Limit: 2})
	if want := []string{"teams/t1/a", "users/u1/a"}; err != nil || !slices.Equal(paths(items), want) {
		t.Fatalf("Search all, limit 2: %v, %v; want %v", paths(items), err, want)
	}
	if items, err := s.Search(ctx, []string{"nobody"}, graph.SearchOptions{}); err != nil || len(items) != 0 {
		t.Fatalf("Search of an empty namespace: %v, %v", items, err)
	}
	if _, err := s.Search(ctx, nil, graph.SearchOptions{Query: "x"}); !errors.Is(err, graph.ErrNotSupported) {
		t.Fatalf("query without an embedder: %v, want ErrNotSupported", err)
	}
}

func testStoreSemantic(t *testing.T, newStore func(*testing.T, graph.Embedder) graph.Store) {
	s, ctx := newStore(t, LetterEmbedder), storeCtx(t)
	ns := []string{"mem"}
	for key, text := range map[string]string{"1": "otters hold hands", "2": "zebra jazz", "3": "otter"} {
		if err := s.Put(ctx, ns, key, text); err != nil {
			t.Fatal(err)
		}
	}
	items, err := s.Search(ctx, ns, graph.SearchOptions{Query: "otters", Limit: 2})
	if err != nil || len(items) != 2 || items[0].Key != "3" || items[1].Key != "1" || items[0].Score < items[1].Score || items[0].Score <= 0 {
		t.Fatalf("semantic search: %+v, %v", items, err)
	}
}

func testStoreInvalid(t *testing.T, newStore func(*testing.T, graph.Embedder) graph.Store) {
	s, ctx := newStore(t, nil), storeCtx(t)
	for _, bad := range []struct {
		ns  []string
		key string
	}{{nil, "k"}, {[]string{"a.b"}, "k"}, {[]string{"a"}, "k*"}, {[]string{"a"}, ""}, {[]string{""}, "k"}} {
		if err := s.Put(ctx, bad.ns, bad.key, 1); !errors.Is(err, graph.ErrInvalidArgument) {
			t.Errorf("Put %q %q: %v, want ErrInvalidArgument", bad.ns, bad.key, err)
		}
	}
	if _, err := s.Search(ctx, []string{"a>"}, graph.SearchOptions{}); !errors.Is(err, graph.ErrInvalidArgument) {
		t.Errorf("Search of a bad prefix: %v", err)
	}
}
