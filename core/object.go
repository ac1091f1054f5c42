package core

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
)

// ObjectDelta is one step of a streamed object ([StreamObject]).
type ObjectDelta[T any] struct {
	// Partial is the object as far as it has arrived: the JSON so far,
	// completed (the open string, arrays and objects closed, a trailing key
	// or comma dropped) and decoded. Fields that have not arrived are zero.
	// On the final delta it is the whole object, validated against the schema.
	Partial T
	// Text is the raw answer so far.
	Text string
	// Final is set on the last delta, with the request's Usage.
	Final bool
	Usage Usage
}

// StreamObject is [GenerateObject] streamed: it yields the object each time
// more of it has arrived (partial objects, for a UI to show as they grow),
// then a final delta with the whole object validated against T's schema. An
// answer that does not fit ends the stream with a CodeSchema error (cause a
// *SchemaError). Breaking the loop or ending ctx closes the HTTP stream.
func StreamObject[T any](ctx context.Context, m LLM, req Request) iter.Seq2[ObjectDelta[T], error] {
	return func(yield func(ObjectDelta[T], error) bool) {
		const op = "llm.object.stream"
		if m == nil {
			yield(ObjectDelta[T]{}, Errorf(CodeUnavailable, op, "no LLM configured"))
			return
		}
		schema, err := SchemaFor[T]()
		if err != nil {
			yield(ObjectDelta[T]{}, err)
			return
		}
		resolved, err := schema.Resolve(nil)
		if err != nil {
			yield(ObjectDelta[T]{}, Errorf(CodeInvalid, op, "resolve schema: %w", err))
			return
		}
		req.Format = &Format{Name: "answer", Schema: schema}
		var text strings.Builder
		last := ""
		for d, err := range m.Stream(ctx, req) {
			if err != nil {
				yield(ObjectDelta[T]{Text: text.String()}, err)
				return
			}
			if d.Final != nil {
				v, err := decodeFitting[T](resolved, d.Final.Text)
				if err != nil {
					yield(ObjectDelta[T]{Text: d.Final.Text}, E(CodeSchema, op, err))
					return
				}
				yield(ObjectDelta[T]{Partial: v, Text: d.Final.Text, Final: true, Usage: d.Final.Usage}, nil)
				return
			}
			text.WriteString(d.Text)
			done, ok := CompleteJSON(text.String())
			if !ok || done == last {
				continue
			}
			var v T
			if json.Unmarshal([]byte(done), &v) != nil {
				continue
			}
			last = done
			if !yield(ObjectDelta[T]{Partial: v, Text: text.String()}, nil) {
				return
			}
		}
	}
}

// CompleteJSON turns a prefix of a JSON document into a valid document: an
// open string value is closed, open arrays and objects are closed, and what
// cannot be completed (a key without its value, a trailing comma, half a
// literal) is dropped. ok is false when nothing usable has arrived yet.
func CompleteJSON(prefix string) (string, bool) {
	type frame struct {
		obj       bool
		expectKey bool // in an object: the next string is a key
	}
	var stack []frame
	closers := func(st []frame) string {
		var b strings.Builder
		for i := len(st) - 1; i >= 0; i-- {
			if st[i].obj {
				b.WriteByte('}')
			} else {
				b.WriteByte(']')
			}
		}
		return b.String()
	}
	safe, safeClose := -1, ""
	mark := func(i int) { safe, safeClose = i, closers(stack) }
	inStr, esc, strIsKey := false, false, false
	strStart := 0
	tokStart := -1
	s := prefix
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if !strIsKey {
					mark(i + 1)
				}
			}
			continue
		}
		if tokStart >= 0 && !strings.ContainsRune("+-.0123456789eEtrufalsn", rune(c)) {
			tokStart = -1
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '{':
			stack = append(stack, frame{obj: true, expectKey: true})
			mark(i + 1)
		case '[':
			stack = append(stack, frame{})
			mark(i + 1)
		case '}', ']':
			if len(stack) == 0 {
				return "", false
			}
			stack = stack[:len(stack)-1]
			mark(i + 1)
		case ',':
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].expectKey = true
			}
		case ':':
			if n := len(stack); n > 0 {
				stack[n-1].expectKey = false
			}
		case '"':
			inStr, strStart = true, i
			strIsKey = len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].expectKey
		default:
			if tokStart < 0 {
				tokStart = i
			}
			if json.Valid([]byte(s[tokStart : i+1])) {
				mark(i + 1)
			}
		}
	}
	if inStr && !strIsKey {
		body := s[strStart:]
		if esc {
			body = body[:len(body)-1]
		}
		if j := strings.LastIndex(body, `\u`); j >= 0 && len(body)-j < 6 {
			body = body[:j]
		}
		out := s[:strStart] + body + `"` + closers(stack)
		if json.Valid([]byte(out)) {
			return out, true
		}
	}
	if safe < 0 {
		return "", false
	}
	out := s[:safe] + safeClose
	return out, json.Valid([]byte(out))
}
