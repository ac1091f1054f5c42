package remote

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestCheckMsgpack(t *testing.T) {
	good := []any{
		nil, true, false, 0, 127, -1, -32, 200, -200, 70000, -70000, int64(1) << 40, uint64(1) << 63, 1.5, float32(2.5),
		"", "short", strings.Repeat("s", 40), strings.Repeat("s", 300), strings.Repeat("s", 70000),
		[]byte{1, 2, 3}, bytes.Repeat([]byte{1}, 300), bytes.Repeat([]byte{1}, 70000),
		[]any{}, []any{1, "a", nil}, make([]any, 20), make([]any, 70000),
		map[string]any{}, map[string]any{"a": 1, "b": []any{map[string]any{"c": "d"}}},
		map[string]any{"state": map[int]any{1: "x"}, "records": []any{map[string]any{"op": "emit"}}},
	}
	big := map[string]any{}
	for i := range 20 {
		big[strings.Repeat("k", i+1)] = i
	}
	good = append(good, big)
	for _, v := range good {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkMsgpack(b, 10); err != nil {
			t.Errorf("%T %.40v: %v", v, v, err)
		}
		if len(b) > 1 {
			if err := checkMsgpack(b[:len(b)-1], 10); err == nil {
				t.Errorf("%T %.40v cut short: accepted", v, v)
			}
		}
		if err := checkMsgpack(append(b, 0xc0), 10); err == nil {
			t.Errorf("%T %.40v with a byte after: accepted", v, v)
		}
	}
	// Extensions (fixext 1..16, ext 8/16/32).
	for _, b := range [][]byte{
		{0xd4, 1, 0}, {0xd5, 1, 0, 0}, {0xd6, 1, 0, 0, 0, 0}, {0xd7, 1, 0, 0, 0, 0, 0, 0, 0, 0},
		append([]byte{0xd8, 1}, make([]byte, 16)...), {0xc7, 2, 1, 0, 0}, {0xc8, 0, 2, 1, 0, 0}, {0xc9, 0, 0, 0, 2, 1, 0, 0},
	} {
		if err := checkMsgpack(b, 10); err != nil {
			t.Errorf("ext % x: %v", b, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":    {},
		"never":    {0xc1},
		"deep":     append(bytes.Repeat([]byte{0x91}, 11), 0xc0),
		"huge map": {0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0},
		"huge str": {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
	} {
		if err := checkMsgpack(b, 10); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkMsgpack(append(bytes.Repeat([]byte{0x91}, 10), 0xc0), 11); err != nil {
		t.Errorf("10 levels with max 11: %v", err)
	}
	deep := append(bytes.Repeat([]byte{0x91}, 1<<20), 0xc0)
	if err := checkMsgpack(deep, maxDepth); err == nil || !strings.Contains(err.Error(), "nested deeper than 1000") {
		t.Errorf("a million levels: %v", err)
	}
}
