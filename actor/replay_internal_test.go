package actor

import (
	"testing"

	"github.com/effectors/effectors/internal/codec"
)

// TestFirstDifference: values compare as values (map order, integer widths
// and encodings do not matter), and the first difference is named by path
// in sorted key order.
func TestFirstDifference(t *testing.T) {
	enc := func(v any) []byte {
		t.Helper()
		b, err := codec.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name     string
		a, b     any
		wantDiff string
	}{
		{"equal, widths differ", map[string]any{"n": int8(3), "m": []any{1, "x"}}, map[string]any{"m": []any{int64(1), "x"}, "n": uint64(3)}, ""},
		{"number", map[string]any{"a": 1, "b": 2}, map[string]any{"a": 1, "b": 3}, "state.b: stored 2, replayed 3"},
		{"missing key", map[string]any{"a": 1, "z": 1}, map[string]any{"a": 1}, "state.z: stored 1, absent from the replayed state"},
		{"extra key", map[string]any{"a": 1}, map[string]any{"a": 1, "b": true}, "state.b: absent from the stored state, replayed true"},
		{"list length", map[string]any{"l": []int{1, 2}}, map[string]any{"l": []int{1}}, "state.l: stored 2 elements, replayed 1"},
		{"nested", map[string]any{"o": map[string]any{"s": "x"}}, map[string]any{"o": map[string]any{"s": "y"}}, `state.o.s: stored "x", replayed "y"`},
		{"type", map[string]any{"v": "1"}, map[string]any{"v": 1}, `state.v: stored "1", replayed 1`},
		{"bytes", map[string]any{"b": []byte{1, 2, 3}}, map[string]any{"b": []byte{1, 9, 3}}, "state.b: binary values differ from byte 1 (stored 3 bytes, replayed 3)"},
	}
	for _, tc := range cases {
		equal, diff, err := compareStates(enc(tc.a), enc(tc.b))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.wantDiff == "" {
			if !equal || diff != "" {
				t.Errorf("%s: %q, want equal", tc.name, diff)
			}
			continue
		}
		if equal || len(diff) < len(tc.wantDiff) || diff[:len(tc.wantDiff)] != tc.wantDiff {
			t.Errorf("%s: %q, want %q", tc.name, diff, tc.wantDiff)
		}
	}
}
