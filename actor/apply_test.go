package actor_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// roundTrip is a state whose Go value differs from what a state document
// keeps: a field tagged json:"-", an unexported field and an any field.
type roundTrip struct {
	Seen   []string `json:"seen"`
	Secret string   `json:"-"`
	hidden int
	Any    any `json:"any"`
}

// roundTripKind records, on each record, what the logic sees of the three
// fields, then sets them again.
func roundTripKind() actor.Kind[roundTrip] {
	return actor.Kind[roundTrip]{
		Name:    "roundtrip",
		Initial: roundTrip{Secret: "s", hidden: 7, Any: map[string]int{"a": 1}},
		Logic: func(ctx *actor.Context, s roundTrip) (roundTrip, error) {
			s.Seen = append(s.Seen, fmt.Sprintf("secret=%q hidden=%d any=%T %v", s.Secret, s.hidden, s.Any, s.Any))
			s.Secret, s.hidden, s.Any = "s", 7, map[string]int{"a": 1}
			return s, nil
		},
	}
}

// TestApplyRunsWhatANodeRuns applies two records with Apply and with a real
// node: the logic sees the same state each time, and the final states are
// equal, although the Go values the logic returns are not what is stored.
func TestApplyRunsWhatANodeRuns(t *testing.T) {
	t.Parallel()
	k := roundTripKind()
	self := ref("roundtrip", "r1")

	// Apply, twice, starting from the kind's Initial as a node does.
	state := k.Initial
	for range 2 {
		rec, err := records.New("tick", nil)
		if err != nil {
			t.Fatal(err)
		}
		if state, _, err = k.Apply(ctxT(t), self, rec, state); err != nil {
			t.Fatal(err)
		}
	}
	if state.Secret != "" || state.hidden != 0 {
		t.Errorf("Apply returned Secret %q, hidden %d: fields a state document does not keep must come back zero", state.Secret, state.hidden)
	}
	if _, ok := state.Any.(map[string]any); !ok {
		t.Errorf("Apply returned Any as %T, want map[string]any as msgpack decodes it", state.Any)
	}

	// A real node, same kind, same records.
	_, conn := server(t)
	startNode(t, conn, nil, k)
	c := newClient(t, conn)
	ctx := ctxT(t)
	if _, err := c.Create(ctx, self, nil); err != nil {
		t.Fatal(err)
	}
	var last records.Record
	for range 2 {
		rec, err := records.New("tick", nil)
		if err != nil {
			t.Fatal(err)
		}
		if last, err = c.Send(ctx, self, rec); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := c.StateAt(ctx, self, last.Seq)
	if err != nil {
		t.Fatal(err)
	}
	var onNode roundTrip
	if err := doc.Decode(&onNode); err != nil {
		t.Fatal(err)
	}

	want := []string{
		`secret="" hidden=0 any=map[string]interface {} map[a:1]`,
		`secret="" hidden=0 any=map[string]interface {} map[a:1]`,
	}
	if got := strings.Join(onNode.Seen, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("on a node the logic saw\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if got := strings.Join(state.Seen, "\n"); got != strings.Join(onNode.Seen, "\n") {
		t.Fatalf("in Apply the logic saw\n%s\non a node\n%s", got, strings.Join(onNode.Seen, "\n"))
	}
	if fmt.Sprintf("%#v", state) != fmt.Sprintf("%#v", onNode) {
		t.Fatalf("Apply's state %#v, the node's %#v", state, onNode)
	}
}

// TestApplyScreensRecords: records a node would dead-letter before the logic
// runs fail in Apply with a permanent error.
func TestApplyScreensRecords(t *testing.T) {
	t.Parallel()
	ran := false
	k := actor.Kind[int]{Name: "screen", MaxPayload: 8, Accept: []string{records.ContentMsgpack},
		Logic: func(*actor.Context, int) (int, error) { ran = true; return 1, nil }}
	big, _ := records.New("t", strings.Repeat("x", 20))
	asJSON, _ := records.NewJSON("t", 1)
	bad, _ := records.New("t", nil)
	bad.Payload = []byte{0xc1} // never used in msgpack
	unknownPriority, _ := records.New("t", nil)
	unknownPriority.Priority = "urgent"
	for name, rec := range map[string]records.Record{"oversize": big, "content type": asJSON, "malformed payload": bad, "malformed header": unknownPriority} {
		t.Run(name, func(t *testing.T) {
			_, _, err := k.Apply(ctxT(t), ref("screen", "a"), rec, 0)
			if err == nil || !actor.IsPermanent(err) || ran {
				t.Fatalf("Apply: %v (permanent %v), logic ran %v: want a permanent error before the logic", err, actor.IsPermanent(err), ran)
			}
		})
	}
	ok, _ := records.New("t", 1)
	if next, _, err := k.Apply(ctxT(t), ref("screen", "a"), ok, 0); err != nil || next != 1 {
		t.Fatalf("Apply: %d, %v", next, err)
	}
}

// TestApplyStateThatDoesNotEncode: a state msgpack cannot encode fails in
// Apply as it fails on a node.
func TestApplyStateThatDoesNotEncode(t *testing.T) {
	t.Parallel()
	k := actor.Kind[struct {
		F func() `json:"f"`
	}]{Name: "fn", Logic: func(_ *actor.Context, s struct {
		F func() `json:"f"`
	}) (struct {
		F func() `json:"f"`
	}, error) {
		s.F = func() {}
		return s, nil
	}}
	rec, _ := records.New("t", nil)
	_, _, err := k.Apply(ctxT(t), ref("fn", "a"), rec, k.Initial)
	var pe *actor.PanicError
	if err == nil || errors.As(err, &pe) {
		t.Fatalf("Apply: %v, want the encoding error", err)
	}
}
