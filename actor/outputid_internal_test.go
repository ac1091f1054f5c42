package actor

import (
	"strings"
	"testing"

	"github.com/effectors/effectors/records"
)

// An output id is the same every time a record is processed (by any node:
// they share the key), and differs with the key, the effector, the input's
// sequence or id, and the output's number.
func TestOutputIDSigned(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	ctx := func(key []byte, self records.Ref, seq uint64, id string) *Context {
		return newCallContext(nil, &call{idKey: key, self: self, rec: records.Record{ID: id, Seq: seq}})
	}
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	base := ctx(key, c1, 7, "in-1").outputID("0")
	if again := ctx(key, c1, 7, "in-1").outputID("0"); again != base {
		t.Errorf("output id not stable: %s then %s", base, again)
	}
	if !strings.HasPrefix(base, "in-1:0.") || len(base) != len("in-1:0.")+20 {
		t.Errorf("output id %s, want in-1:0.<20 hex digits>", base)
	}
	for name, other := range map[string]string{
		"key":    ctx([]byte(strings.Repeat("x", 32)), c1, 7, "in-1").outputID("0"),
		"self":   ctx(key, records.Ref{Kind: "counter", ID: "c2"}, 7, "in-1").outputID("0"),
		"seq":    ctx(key, c1, 8, "in-1").outputID("0"),
		"id":     ctx(key, c1, 7, "in-2").outputID("0"),
		"n":      ctx(key, c1, 7, "in-1").outputID("1"),
		"no key": ctx(nil, c1, 7, "in-1").outputID("0"),
	} {
		if other == base || (name != "id" && name != "n" && strings.TrimPrefix(other, "in-1:0") == strings.TrimPrefix(base, "in-1:0")) {
			t.Errorf("another %s gives %s, the same tag as %s", name, other, base)
		}
	}
	if got := ctx(nil, c1, 7, "in-1").outputID("0"); got != "in-1:0" {
		t.Errorf("unsigned output id %s, want in-1:0 (Kind.Apply)", got)
	}
	long := strings.Repeat("a", records.MaxIDLen)
	if id := ctx(key, c1, 7, long).outputID("12"); len(id) > records.MaxIDLen || (records.Record{ID: id, Type: "x"}).Validate() != nil {
		t.Errorf("output id of a %d-character input id: %q (%d characters, %v)", len(long), id, len(id), (records.Record{ID: id, Type: "x"}).Validate())
	}
}
