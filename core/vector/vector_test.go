package vector_test

import (
	"errors"
	"math"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/vector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCosine(t *testing.T) {
	for _, tc := range []struct {
		a, b []float32
		want float64
	}{
		{[]float32{1, 0}, []float32{1, 0}, 1},
		{[]float32{1, 0}, []float32{0, 1}, 0},
		{[]float32{1, 1}, []float32{-1, -1}, -1},
		{[]float32{0, 0}, []float32{1, 1}, 0},
		{[]float32{3, 4}, []float32{6, 8}, 1},
	} {
		got, err := vector.Cosine(tc.a, tc.b)
		if err != nil || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Cosine(%v,%v) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
		}
	}
	if _, err := vector.Cosine([]float32{1}, []float32{1, 2}); err == nil {
		t.Fatal("dimension mismatch accepted")
	}
}

func TestStore(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	fake := llmtest.NewServer(t)
	p, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "m", EmbedModel: "embed"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st, err := vector.Open(ctx, conn, p, vector.Config{Collection: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	docs := []core.Doc{
		{ID: "d1", Text: "red apples grow on trees"},
		{ID: "d2", Text: "fast cars drive on roads"},
		{ID: "d3", Text: "green apples are sour apples", Meta: map[string]string{"lang": "en"}},
	}
	if err := st.Add(ctx, docs...); err != nil {
		t.Fatal(err)
	}
	hits, err := st.Search(ctx, "apples", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].Doc.ID != "d3" || hits[1].Doc.ID != "d1" || hits[0].Score <= hits[1].Score || hits[0].Doc.Meta["lang"] != "en" {
		t.Fatalf("hits = %+v", hits)
	}
	// Durable: a new store on the same bucket (as another node would open it) sees them.
	other, err := vector.Open(ctx, srv.Connect(t), p, vector.Config{Collection: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	hits, err = other.Search(ctx, "cars roads", 5)
	if err != nil || len(hits) != 3 || hits[0].Doc.ID != "d2" {
		t.Fatalf("hits %+v err %v", hits, err)
	}
	// Other collections are separate.
	empty, err := vector.Open(ctx, conn, p, vector.Config{Collection: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := empty.Search(ctx, "apples", 3); err != nil || len(hits) != 0 {
		t.Fatalf("other collection: %+v %v", hits, err)
	}
	if err := st.Delete(ctx, "d3"); err != nil {
		t.Fatal(err)
	}
	if hits, _ := st.Search(ctx, "apples", 1); len(hits) != 1 || hits[0].Doc.ID != "d1" {
		t.Fatalf("after delete: %+v", hits)
	}
	if reqs := fake.Requests(); reqs[0].Model != "embed" || reqs[0].Path != "/v1/embeddings" {
		t.Fatalf("embedding request %+v", reqs[0])
	}
	// Bad input.
	if err := st.Add(ctx, core.Doc{ID: "no.dots"}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := st.Search(ctx, "x", 0); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("k=0: %v", err)
	}
	if _, err := vector.Open(ctx, conn, p, vector.Config{Collection: "a b"}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("bad collection: %v", err)
	}

	// Through a scope: permission-checked.
	svc := &core.Services{Vector: st}
	scope := svc.Scope("k", core.Permissions{Services: []core.Service{core.ServiceVector}})
	if hits, err := scope.Search(ctx, "apples", 1); err != nil || len(hits) != 1 {
		t.Fatalf("scope search %+v %v", hits, err)
	}
}
