package scripted

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Tag starts every text the scripted model answers, and every string it
// puts in a structured answer, so that no answer can be taken for a real
// model's.
const Tag = "[scripted model]"

// Script is the scripted model: its answer to req, a pure function of req
// (the same request always gets the same answer).
//
//   - Asked for structured output (a "json_schema" response format), it
//     answers a JSON value that fits the schema: every property of an
//     object, the first value of an enum, the minimum of a number, the
//     minimum count of array items, strings that start with [Tag].
//   - Offered tools, it calls each of them once, its arguments fitting the
//     tool's schema (strings: the last user message); once the tools
//     answered (tool messages after the last user message), it says what
//     they answered.
//   - Otherwise it answers a text that starts with [Tag], quotes the last
//     user message and says how many user messages the conversation holds
//     (so a thread's memory shows), streamed word by word at about a
//     hosted model's pace (20ms a word).
func Script(req Request) Reply {
	if schema, ok := formatSchema(req.ResponseFormat); ok {
		v := fill(schema, schema, func(name string) string { return Tag + " " + name }, 0)
		b, err := json.Marshal(v)
		if err != nil {
			return Reply{Text: fmt.Sprintf("%s cannot answer in this format: %v", Tag, err)}
		}
		return Reply{Text: string(b)}
	}
	last := req.LastUser()
	if len(req.Tools) > 0 {
		results := toolResults(req)
		if len(results) == 0 {
			var calls []ToolCall
			for i, t := range req.Tools {
				var schema map[string]any
				_ = json.Unmarshal(t.Function.Parameters, &schema) // no schema: no arguments
				args, err := json.Marshal(fill(schema, schema, func(string) string { return last }, 0))
				if err != nil || schema == nil {
					args = []byte("{}")
				}
				calls = append(calls, ToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: t.Function.Name, Arguments: string(args)})
			}
			return Reply{ToolCalls: calls}
		}
		return Reply{Text: fmt.Sprintf("%s The tools answered: %s. %s", Tag, strings.Join(results, "; "), notAModel), Pace: pace}
	}
	users := 0
	for _, m := range req.Messages {
		if m.Role == "user" {
			users++
		}
	}
	return Reply{Text: fmt.Sprintf("%s You said: %q (message %d of this conversation). %s", Tag, last, users, notAModel), Pace: pace}
}

// pace is the wait before each streamed word of a text answer: about the
// pace of a hosted model, so that an answer arrives in pieces as it would.
const pace = 20 * time.Millisecond

// notAModel ends every text answer.
const notAModel = "This is a canned answer of the built-in scripted model, not a language model's: set --llm-base-url and --llm-model (EA_LLM_BASE_URL, EA_LLM_MODEL) to an OpenAI-compatible API for real answers."

// toolResults are the tool messages after the last user message, as
// "name: result" (the name from the assistant's call), in order.
func toolResults(req Request) []string {
	start := 0
	for i, m := range req.Messages {
		if m.Role == "user" {
			start = i + 1
		}
	}
	names := map[string]string{}
	var out []string
	for _, m := range req.Messages[start:] {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
		if m.Role == "tool" {
			name := names[m.ToolCallID]
			if name == "" {
				name = m.ToolCallID
			}
			out = append(out, name+": "+m.Text())
		}
	}
	return out
}

// formatSchema is the JSON schema of a "json_schema" response format.
func formatSchema(raw json.RawMessage) (map[string]any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Type != "json_schema" || f.JSONSchema.Schema == nil {
		return nil, false
	}
	return f.JSONSchema.Schema, true
}

// maxDepth bounds fill's recursion (a schema that refers to itself).
const maxDepth = 8

// fill returns a value fitting schema (root holds its $defs), strings from
// str given the property's name.
func fill(root, schema map[string]any, str func(name string) string, depth int) any {
	return fillNamed(root, schema, "value", str, depth)
}

func fillNamed(root, schema map[string]any, name string, str func(string) string, depth int) any {
	if schema == nil || depth > maxDepth {
		return nil
	}
	if ref, ok := schema["$ref"].(string); ok {
		return fillNamed(root, resolve(root, ref), name, str, depth+1)
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if first, ok := alts[0].(map[string]any); ok {
				return fillNamed(root, first, name, str, depth+1)
			}
		}
	}
	switch schemaType(schema) {
	case "object":
		props, _ := schema["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make(map[string]any, len(keys))
		for _, k := range keys {
			sub, _ := props[k].(map[string]any)
			out[k] = fillNamed(root, sub, k, str, depth+1)
		}
		return out
	case "array":
		items, _ := schema["items"].(map[string]any)
		n, _ := schema["minItems"].(float64)
		out := make([]any, 0, int(n))
		for range int(n) {
			out = append(out, fillNamed(root, items, name, str, depth+1))
		}
		return out
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "null":
		return nil
	}
	s := str(name)
	if n, ok := schema["maxLength"].(float64); ok && len([]rune(s)) > int(n) {
		s = string([]rune(s)[:int(n)])
	}
	return s
}

// schemaType is a schema's type: the first that is not "null" of a list.
func schemaType(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	if _, ok := schema["properties"]; ok {
		return "object"
	}
	return "string"
}

// resolve finds a local reference ("#/$defs/Name", "#/definitions/Name").
func resolve(root map[string]any, ref string) map[string]any {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = root
	for p := range strings.SplitSeq(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	m, _ := cur.(map[string]any)
	return m
}
