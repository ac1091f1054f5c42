package codec

import (
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	type inner struct {
		Count int64 `json:"count"`
	}
	type state struct {
		Name  string         `json:"name"`
		Items []string       `json:"items,omitempty"`
		Inner inner          `json:"inner"`
		Any   map[string]any `json:"any"`
	}
	in := state{Name: "x", Items: []string{"a"}, Inner: inner{Count: 3}, Any: map[string]any{"k": "v"}}
	for range 3 { // pooled encoders and decoders are reused
		b, err := Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out state
		if err := Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("got %+v, want %+v", out, in)
		}
		var generic map[string]any
		if err := Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		if generic["name"] != "x" || generic["inner"].(map[string]any)["count"] != int8(3) {
			t.Fatalf("generic form %#v: fields must be named by json tags", generic)
		}
	}
	if err := Unmarshal([]byte{0xc1}, new(any)); err == nil {
		t.Fatal("invalid msgpack decoded without error")
	}
}
