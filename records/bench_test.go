package records_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/records"
)

func BenchmarkFromMsg(b *testing.B) {
	full, err := records.New("task", map[string]any{"by": 2, "tags": []string{"a", "b"}, "nested": map[string]any{"x": 1.5}})
	if err != nil {
		b.Fatal(err)
	}
	full.From = records.Ref{Kind: "supervisor", ID: "s1"}
	full.Process, full.Cause, full.Reply = "orch-1", records.NewID()+":0", "ea.mbox.supervisor.s1"
	full.Time = time.Now()
	plain := nats.Header{"EA-Type": {"inc"}, "Content-Type": {"application/json"}}
	canonical := nats.Header{"Ea-Type": {"inc"}, "Content-Type": {"application/json"}}

	for _, bm := range []struct {
		name string
		h    nats.Header
		data []byte
	}{
		{"full", full.Header(), full.Payload},
		{"plain", plain, []byte(`{"by":2,"tags":["a","b"],"nested":{"x":1.5}}`)},
		{"canonical keys", canonical, []byte(`{"by":2}`)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := records.FromMsg("ea.mbox.k.i", bm.h, bm.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeader builds the headers of an effector's typical output: id,
// type, from, cause, time and content type.
func BenchmarkHeader(b *testing.B) {
	rec, err := records.New("count", map[string]int{"count": 3})
	if err != nil {
		b.Fatal(err)
	}
	rec.From, rec.Cause = records.Ref{Kind: "counter", ID: "c1"}, records.NewID()
	b.ReportAllocs()
	for b.Loop() {
		if h := rec.Header(); len(h) != 6 {
			b.Fatalf("%d headers, want 6", len(h))
		}
	}
}
