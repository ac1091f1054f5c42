package records

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/effectors/effectors/internal/codec"
)

// skipOne is the reference for checkMsgpack: msgpack's own Skip, then no
// trailing bytes. It recurses once per level, so only use it on inputs
// shallower than MaxDepth.
func skipOne(data []byte) error {
	r := bytes.NewReader(data)
	if err := msgpack.NewDecoder(r).Skip(); err != nil {
		return err
	}
	if r.Len() > 0 {
		return errors.New("trailing bytes")
	}
	return nil
}

// msgpackSamples returns well-formed msgpack of every kind of value.
func msgpackSamples(t testing.TB) [][]byte {
	values := []any{
		nil, true, false,
		0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, uint64(math.MaxUint64),
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, int64(math.MinInt64),
		float32(1.5), 2.5,
		"", "a", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 256), strings.Repeat("s", 65536),
		[]byte{}, []byte{1}, bytes.Repeat([]byte{2}, 256), bytes.Repeat([]byte{3}, 65536),
		[]any{}, []any{1, "a", nil}, make([]any, 16), make([]any, 65536),
		map[string]any{}, map[string]any{"a": 1, "b": []any{map[string]any{"c": nil}}},
		map[int]int{1: 2},
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), time.Unix(1<<34, 1),
		struct {
			A int    `json:"a"`
			B string `json:"b"`
		}{1, "x"},
	}
	var out [][]byte
	for _, v := range values {
		b, err := codec.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%T): %v", v, err)
		}
		out = append(out, b)
	}
	for _, n := range []int{1, 2, 4, 8, 16, 0, 3, 256, 65536} {
		out = append(out, ext(n)) // fixext and ext8/16/32
	}
	return append(out,
		[]byte{0xde, 0x00, 0x01, 0xa1, 'k', 0xc0},              // map16
		[]byte{0xdf, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02},       // map32
		[]byte{0xdc, 0x00, 0x01, 0x01},                         // array16
		[]byte{0xdd, 0x00, 0x00, 0x00, 0x01, 0x01},             // array32
		[]byte{0xd9, 0x01, 'a'}, []byte{0xda, 0x00, 0x01, 'a'}, // str8, str16
		[]byte{0xc4, 0x00}, []byte{0xc5, 0x00, 0x00}, // bin8, bin16
		[]byte{0xc6, 0x00, 0x00, 0x00, 0x00},                         // bin32
		[]byte{0x80}, []byte{0x90}, []byte{0xa0}, []byte{0xdc, 0, 0}, // empty containers
	)
}

// ext returns an ext value with n bytes of data, in the shortest form.
func ext(n int) []byte {
	var b []byte
	switch n {
	case 1:
		b = []byte{0xd4}
	case 2:
		b = []byte{0xd5}
	case 4:
		b = []byte{0xd6}
	case 8:
		b = []byte{0xd7}
	case 16:
		b = []byte{0xd8}
	default:
		switch {
		case n < 1<<8:
			b = []byte{0xc7, byte(n)}
		case n < 1<<16:
			b = []byte{0xc8, byte(n >> 8), byte(n)}
		default:
			b = []byte{0xc9, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
		}
	}
	b = append(b, 42) // type
	return append(b, make([]byte, n)...)
}

func TestCheckMsgpackAgreesWithSkip(t *testing.T) {
	for _, good := range msgpackSamples(t) {
		if err := skipOne(good); err != nil {
			t.Fatalf("sample %x: Skip: %v", head(good), err)
		}
		if err := checkMsgpack(good); err != nil {
			t.Errorf("checkMsgpack(%x) = %v", head(good), err)
		}
		// Every proper prefix is truncated, and any extra byte trails.
		for n := 0; n < len(good) && n < 300; n++ {
			if err := checkMsgpack(good[:n]); err == nil {
				t.Errorf("checkMsgpack(%x) accepts a prefix", head(good[:n]))
			}
		}
		if err := checkMsgpack(append(bytes.Clone(good), 0xc0)); err == nil {
			t.Errorf("checkMsgpack(%x c0) accepts a trailing byte", head(good))
		}
	}
	// Every single code byte, alone and with some bytes after it.
	for c := range 256 {
		for _, data := range [][]byte{{byte(c)}, {byte(c), 0, 0, 0, 0, 1, 0xc0}, {byte(c), 0, 1, 0xc0}} {
			want, got := skipOne(data), checkMsgpack(data)
			if (want == nil) != (got == nil) {
				t.Errorf("%x: Skip says %v, checkMsgpack says %v", data, want, got)
			}
		}
	}
}

func TestCheckMsgpackDepth(t *testing.T) {
	nest := func(depth int, open byte, leaf ...byte) []byte {
		return append(bytes.Repeat([]byte{open}, depth), leaf...)
	}
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"arrays at the limit", nest(MaxDepth, 0x91, 0x01), true},
		{"arrays past the limit", nest(MaxDepth+1, 0x91, 0x01), false},
		{"empty array at the limit", nest(MaxDepth-1, 0x91, 0x90), true},
		{"empty array past the limit", nest(MaxDepth, 0x91, 0x90), false},
		{"maps without the last value", bytes.Repeat([]byte{0x81, 0xa0}, MaxDepth), false},
		{"huge nesting", nest(1<<22, 0x91, 0x01), false},
	}
	maps := bytes.Repeat([]byte{0x81, 0xa0}, MaxDepth)
	tests = append(tests, struct {
		name string
		data []byte
		ok   bool
	}{"maps at the limit", append(maps, 0xc0), true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkMsgpack(tt.data)
			if (err == nil) != tt.ok {
				t.Fatalf("checkMsgpack = %v, want ok %v", err, tt.ok)
			}
			if tt.ok {
				var v any
				if err := codec.Unmarshal(tt.data, &v); err != nil {
					t.Errorf("accepted payload does not decode: %v", err)
				}
			}
		})
	}
}

func TestCheckMsgpackAllocs(t *testing.T) {
	data, err := codec.Marshal(map[string]any{"by": 2, "list": []any{1, "two", 3.0, map[string]any{"x": nil}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := checkMsgpack(data); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("checkMsgpack allocates %v times", n)
	}
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}
