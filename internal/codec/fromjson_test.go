package codec

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestFromJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`{"n":3,"f":1.5,"big":18446744073709551615,"s":"x","l":[1,-2]}`, map[string]any{
			"n": int8(3), "f": 1.5, "big": uint64(18446744073709551615), "s": "x", "l": []any{int8(1), int8(-2)},
		}},
		{`null`, nil},
	} {
		b, err := FromJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("FromJSON(%s): %v", tc.in, err)
		}
		var got any
		if err := msgpack.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("FromJSON(%s) decodes to %#v, want %#v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`{"a":1} {}`, `1e999`, `{`, ``} {
		if _, err := FromJSON([]byte(bad)); err == nil {
			t.Errorf("FromJSON(%q): no error", bad)
		}
	}
}
