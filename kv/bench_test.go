package kv_test

import (
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go/jetstream"
)

// benchStore starts a server with bucket "bench" and returns a store on it.
func benchStore(b *testing.B) *kv.Store[counter] {
	b.Helper()
	srv := bustest.NewServer(b)
	_, js := srv.Client(b)
	raw, err := js.CreateKeyValue(b.Context(), jetstream.KeyValueConfig{Bucket: "bench"})
	if err != nil {
		b.Fatalf("create bucket: %v", err)
	}
	return kv.New[counter](raw)
}

// BenchmarkUpdate is the runtime's hot path: a compare-and-set with the
// revision kept from the previous write.
func BenchmarkUpdate(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	rev, err := st.Create(ctx, "counter.c1", counter{})
	if err != nil {
		b.Fatalf("create: %v", err)
	}
	v := counter{Name: "bench", Tags: []string{"a", "b"}}
	for b.Loop() {
		v.N++
		if rev, err = st.Update(ctx, "counter.c1", v, rev); err != nil {
			b.Fatalf("update: %v", err)
		}
	}
}

// BenchmarkModify reads before each compare-and-set: two round trips.
func BenchmarkModify(b *testing.B) {
	st := benchStore(b)
	ctx := b.Context()
	if _, err := st.Create(ctx, "counter.c1", counter{}); err != nil {
		b.Fatalf("create: %v", err)
	}
	inc := func(c counter) (counter, error) {
		c.N++
		return c, nil
	}
	for b.Loop() {
		if _, err := st.Modify(ctx, "counter.c1", inc); err != nil {
			b.Fatalf("modify: %v", err)
		}
	}
}
