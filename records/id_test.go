package records

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestEncodeID(t *testing.T) {
	tests := []struct {
		in   [16]byte
		want string
	}{
		{[16]byte{}, "00000000000000000000000000"},
		{[16]byte{15: 1}, "00000000000000000000000001"},
		{[16]byte{15: 31}, "0000000000000000000000000Z"},
		{[16]byte{15: 32}, "00000000000000000000000010"},
		{[16]byte{0: 0x80}, "40000000000000000000000000"},
		{[16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
		// The 65th bit from the right crosses the word boundary.
		{[16]byte{7: 1}, "0000000000000G000000000000"},
	}
	for _, tt := range tests {
		if got := encodeID(tt.in); got != tt.want {
			t.Errorf("encodeID(%x) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestNewIDShape(t *testing.T) {
	id := NewID()
	if len(id) != IDLen || strings.Trim(id, crockford) != "" {
		t.Fatalf("NewID() = %q", id)
	}
	if got := idGot(id); got != "" {
		t.Errorf("NewID() %q breaks the id rule: %s", id, got)
	}
}

func TestNewIDUnique(t *testing.T) {
	const n = 100_000
	seen := make(map[string]struct{}, n)
	for range n {
		id := NewID()
		if _, dup := seen[id]; dup {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = struct{}{}
	}
	// Ids made in the same nanosecond differ too.
	now := time.Now()
	same := make(map[string]struct{}, 1000)
	for range 1000 {
		same[newID(now)] = struct{}{}
	}
	if len(same) != 1000 {
		t.Errorf("%d distinct ids of 1000 made at one instant", len(same))
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	base := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	instants := []time.Time{
		time.Unix(0, 0),
		time.Unix(0, 1),
		base,
		base.Add(time.Nanosecond),
		base.Add(31 * time.Nanosecond),
		base.Add(32 * time.Nanosecond),
		base.Add(time.Second),
		base.AddDate(100, 0, 0),
		time.Unix(0, math.MaxInt64),
	}
	for i := 1; i < len(instants); i++ {
		// Whatever the random parts, the later instant wins.
		for range 200 {
			a, b := newID(instants[i-1]), newID(instants[i])
			if a >= b {
				t.Fatalf("id %s at %v >= id %s at %v", a, instants[i-1], b, instants[i])
			}
		}
	}
	// The largest random part at t sorts before the smallest at t+1ns.
	var hi, lo [16]byte
	for i := 8; i < 16; i++ {
		hi[i] = 0xff
	}
	hi[7], lo[7] = 4, 5
	if a, b := encodeID(hi), encodeID(lo); a >= b {
		t.Errorf("%s >= %s", a, b)
	}
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		_ = NewID()
	}
}
