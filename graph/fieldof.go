package graph

import (
	"reflect"
	"strings"
	"unsafe"
)

// FieldOf declares the field of b's state named name (its json tag, or
// else its Go name), holding a V, in one line:
//
//	count := graph.FieldOf[int](b, "count")                          // plain
//	logs := graph.FieldOf[[]string](b, "log", graph.Append[string])  // reduced
//
// With a reducer it is Reduced, without one Plain. The state must be a
// struct with an exported field of that name and exactly type V (reached
// through embedded structs, not pointers); anything else is reported by
// Compile (ErrInvalidGraph).
func FieldOf[V, S any](b *Builder[S], name string, reduce ...Reducer[V]) *Field[S, V] {
	ptr, err := fieldPtr[S, V](name)
	if err != nil {
		b.errs = append(b.errs, err)
		return &Field[S, V]{name: name}
	}
	if len(reduce) > 1 {
		b.errs = append(b.errs, invalidGraph("field %q: give at most one reducer", name))
	}
	if len(reduce) > 0 {
		return Reduced(b, name, ptr, reduce[0])
	}
	return Plain(b, name, ptr)
}

func fieldPtr[S, V any](name string) (func(*S) *V, error) {
	st := reflect.TypeFor[S]()
	if st.Kind() != reflect.Struct {
		return nil, invalidGraph("FieldOf(%q): the state %s is not a struct; use Plain or Reduced", name, st)
	}
	var found *reflect.StructField
	for _, f := range reflect.VisibleFields(st) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && f.Name == name) {
			found = &f
			break
		}
	}
	if found == nil {
		return nil, invalidGraph("FieldOf(%q): %s has no exported field with that json tag or name", name, st)
	}
	want := reflect.TypeFor[V]()
	if found.Type != want {
		return nil, invalidGraph("FieldOf(%q): field %s.%s is a %s, not a %s", name, st, found.Name, found.Type, want)
	}
	var off uintptr
	t := st
	for _, i := range found.Index {
		if t.Kind() != reflect.Struct {
			return nil, invalidGraph("FieldOf(%q): field %s.%s is reached through a pointer; declare it with Plain or Reduced", name, st, found.Name)
		}
		f := t.Field(i)
		off += f.Offset
		t = f.Type
	}
	return func(s *S) *V { return (*V)(unsafe.Add(unsafe.Pointer(s), off)) }, nil
}
