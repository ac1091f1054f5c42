package graph

import (
	"cmp"
	"fmt"

	"github.com/effectors/effectors/internal/codec"
)

// Reducer merges an update into a field's current value, e.g. Append. It must
// not modify cur or upd in place (they may be shared with earlier states).
type Reducer[V any] func(cur, upd V) V

// Append is the reducer of list fields: the update's items after the current
// ones. It never writes into cur's backing array.
func Append[E any](cur, upd []E) []E {
	out := make([]E, 0, len(cur)+len(upd))
	return append(append(out, cur...), upd...)
}

// Sum is the reducer of counters: cur + upd.
func Sum[N cmp.Ordered](cur, upd N) N { return cur + upd }

// MergeMap is the reducer of map fields: a copy of cur with upd's entries set.
func MergeMap[K comparable, V any](cur, upd map[K]V) map[K]V {
	out := make(map[K]V, len(cur)+len(upd))
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range upd {
		out[k] = v
	}
	return out
}

// fieldDef is what the engine needs of a Field, whatever its value type.
type fieldDef[S any] interface {
	fieldName() string
	reduced() bool
	apply(s *S, v any)
	get(s *S) any
	copy(dst, src *S)
	encode(v any) ([]byte, error)
	decode(b []byte) (any, error)
}

// Field names one field of the state S, holding a V, and says how updates to
// it are applied: a plain field (Plain) takes the written value and accepts
// one write per super-step; a reduced field (Reduced) merges every write of a
// step with its reducer, in application order. Declare fields on the builder
// before compiling; write them from nodes with Field.Set.
type Field[S, V any] struct {
	name   string
	ptr    func(*S) *V
	reduce Reducer[V]
}

// Plain declares a reducer-less field of b's state: a write replaces the
// value, and two writes to it in one super-step fail the step with an
// *InvalidUpdateError. ptr returns the field's address in a state.
func Plain[S, V any](b *Builder[S], name string, ptr func(*S) *V) *Field[S, V] {
	f := &Field[S, V]{name: name, ptr: ptr}
	b.addField(f, ptr == nil)
	return f
}

// Reduced declares a field of b's state whose writes are merged with reduce,
// so parallel nodes can all write it in one step (for lists: Append).
func Reduced[S, V any](b *Builder[S], name string, ptr func(*S) *V, reduce Reducer[V]) *Field[S, V] {
	f := &Field[S, V]{name: name, ptr: ptr, reduce: reduce}
	b.addField(f, ptr == nil || reduce == nil)
	return f
}

// Name returns the field's name.
func (f *Field[S, V]) Name() string { return f.name }

// Get returns the field's value in s.
func (f *Field[S, V]) Get(s S) V { return *f.ptr(&s) }

// Set is a write of v to the field, for Updates. For a reduced field v is
// merged into the current value by the reducer.
func (f *Field[S, V]) Set(v V) Write[S] { return Write[S]{field: f, value: v} }

func (f *Field[S, V]) fieldName() string { return f.name }
func (f *Field[S, V]) reduced() bool     { return f.reduce != nil }

func (f *Field[S, V]) apply(s *S, v any) {
	p := f.ptr(s)
	if f.reduce != nil {
		*p = f.reduce(*p, v.(V))
		return
	}
	*p = v.(V)
}

func (f *Field[S, V]) get(s *S) any     { return *f.ptr(s) }
func (f *Field[S, V]) copy(dst, src *S) { *f.ptr(dst) = *f.ptr(src) }

func (f *Field[S, V]) encode(v any) ([]byte, error) { return codec.Marshal(v.(V)) }

func (f *Field[S, V]) decode(b []byte) (any, error) {
	var v V
	if err := codec.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("graph: decode a write to field %q: %w", f.name, err)
	}
	return v, nil
}

// Write is one field write, made by Field.Set.
type Write[S any] struct {
	field fieldDef[S]
	value any
}

// Field returns the name of the field written.
func (w Write[S]) Field() string {
	if w.field == nil {
		return ""
	}
	return w.field.fieldName()
}

// Value returns the value written.
func (w Write[S]) Value() any { return w.value }

// Send asks for one run of Node in the next super-step with State as its
// input instead of the graph state (LangGraph's Send): a map step. The
// updates of the runs are applied in the order of the Sends.
//
// A node added with AddSendNode takes a payload of its own type instead:
// set Arg (SendArg makes such a Send); the node receives Arg.
type Send[S any] struct {
	Node  string
	State S
	Arg   any
}

// SendArg is a Send of payload arg to node, a node added with AddSendNode
// whose payload type arg has.
func SendArg[S any](node string, arg any) Send[S] { return Send[S]{Node: node, Arg: arg} }

// Update is what a node returns: field writes (Updates), optionally a whole
// new state (Replace) or a value for the whole-state reducer (Merge), and
// optionally where to go next (Goto, WithSends), which then replaces the
// node's outgoing edges for this run (LangGraph's Command). The zero Update
// writes nothing and follows the node's edges.
type Update[S any] struct {
	writes  []Write[S]
	replace *S
	merge   *S
	// A shared-state subgraph's final state (AddSubgraph): its fields that
	// the builder does not declare are set from it; the declared ones are
	// writes (see Graph.expand, which turns subIn, the subgraph's input,
	// and output into those writes).
	output *S
	subIn  *S
	gotos  []string
	sends  []Send[S]
	routed bool
}

// Updates returns an Update made of the given writes.
func Updates[S any](writes ...Write[S]) Update[S] { return Update[S]{writes: writes} }

// Replace returns an Update that sets the whole state to s, bypassing the
// reducers. It counts as a write of every field: nothing else may write in
// the same step. Typical use: the input of a fresh run.
func Replace[S any](s S) Update[S] { return Update[S]{replace: &s} }

// Merge returns an Update whose value is merged into the state by the
// whole-state reducer declared with Builder.StateReducer (an
// *InvalidUpdateError without one). Merges of one step apply in the order of the nodes' names.
func Merge[S any](s S) Update[S] { return Update[S]{merge: &s} }

// With returns u with more writes.
func (u Update[S]) With(writes ...Write[S]) Update[S] {
	u.writes = append(u.writes[:len(u.writes):len(u.writes)], writes...)
	return u
}

// Goto returns u routed to the given nodes (or END) instead of the node's
// edges.
func (u Update[S]) Goto(nodes ...string) Update[S] {
	u.gotos = append(u.gotos[:len(u.gotos):len(u.gotos)], nodes...)
	u.routed = true
	return u
}

// WithSends returns u routed to the given Sends (plus any Goto) instead of
// the node's edges.
func (u Update[S]) WithSends(sends ...Send[S]) Update[S] {
	u.sends = append(u.sends[:len(u.sends):len(u.sends)], sends...)
	u.routed = true
	return u
}

// Writes returns u's field writes.
func (u Update[S]) Writes() []Write[S] { return u.writes }
