package actor

import (
	"reflect"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDocumentMsgpack checks the hand-written encoding against the generic
// one: both decode to the same map, and each decodes what the other wrote.
func TestDocumentMsgpack(t *testing.T) {
	t.Parallel()
	state, _ := codec.Marshal(map[string]any{"count": 3})
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	docs := []Document{
		{ID: "c1", Kind: "counter", Status: StatusIdle, State: state, Seq: 42, Updated: now},
		{ID: "c1", Kind: "counter", Status: StatusError, Seq: 1 << 40, Ahead: []uint64{1<<40 + 5, 1<<40 + 9}, Updated: now, Error: "boom"},
		{ID: "c2", Kind: "counter", Status: StatusIdle, State: state, Seq: 7, Updated: now, Owner: "user-42"},
		{ID: "c3", Kind: "counter", Status: StatusError, Updated: now, Error: "x", Owner: "u"},
		{ID: "c4", Kind: "counter", Status: StatusIdle, State: state, Seq: 9, Updated: now, Version: 3},
		{ID: "c5", Kind: "counter", Status: StatusIdle, Updated: now, Owner: "u", Version: 1 << 30},
		{},
	}
	type generic struct { // the same fields, encoded by reflection
		ID      string             `json:"id"`
		Kind    string             `json:"kind"`
		Status  Status             `json:"status"`
		State   msgpack.RawMessage `json:"state"`
		Seq     uint64             `json:"seq"`
		Ahead   []uint64           `json:"ahead,omitempty"`
		Updated time.Time          `json:"updated"`
		Error   string             `json:"error,omitempty"`
		Owner   string             `json:"owner,omitempty"`
		Version int                `json:"version,omitempty"`
	}
	for _, d := range docs {
		ours, err := codec.Marshal(&d)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := codec.Marshal(generic(d))
		if err != nil {
			t.Fatal(err)
		}
		var a, b map[string]any
		if err := codec.Unmarshal(ours, &a); err != nil {
			t.Fatal(err)
		}
		if err := codec.Unmarshal(theirs, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("hand-written %v\ngeneric      %v", a, b)
		}
		for _, data := range [][]byte{ours, theirs} {
			var back Document
			if err := codec.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if !back.Updated.Equal(d.Updated) {
				t.Fatalf("updated %v, want %v", back.Updated, d.Updated)
			}
			back.Updated = d.Updated
			if !reflect.DeepEqual(back, d) {
				t.Fatalf("decoded %+v\nwant    %+v", back, d)
			}
		}
	}
	var d Document
	if err := codec.Unmarshal([]byte{0x81, 0xa3, 's', 'e', 'q', 0xa1, 'x'}, &d); err == nil {
		t.Fatal("a string seq decoded without error")
	}
}
