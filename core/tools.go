package core

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is a named operation with a JSON-schema'd input, callable by logic
// (Scope.CallTool) and by the model in a tool-call loop (Scope.RunTools).
type Tool struct {
	Name        string
	Description string
	// Schema describes the arguments (a JSON object). Required.
	Schema *jsonschema.Schema
	// Call runs the tool on arguments already validated against Schema and
	// returns the text handed back to the model.
	Call func(ctx context.Context, args json.RawMessage) (string, error)
}

// NewTool builds a tool whose arguments decode into In; the schema is derived
// from In and the result Out is returned to the model as JSON (a string Out
// as is).
func NewTool[In, Out any](name, description string, fn func(context.Context, In) (Out, error)) (Tool, error) {
	if err := checkName("tool", "tool", name); err != nil {
		return Tool{}, err
	}
	if fn == nil {
		return Tool{}, Errorf(CodeInvalid, "tool", "tool %q has no function", name)
	}
	s, err := SchemaFor[In]()
	if err != nil {
		return Tool{}, err
	}
	return Tool{Name: name, Description: description, Schema: s,
		Call: func(ctx context.Context, args json.RawMessage) (string, error) {
			var in In
			if err := json.Unmarshal(args, &in); err != nil {
				return "", Errorf(CodeInvalid, "tool "+name, "arguments: %w", err)
			}
			out, err := fn(ctx, in)
			if err != nil {
				return "", err
			}
			if s, ok := any(out).(string); ok {
				return s, nil
			}
			b, err := json.Marshal(out)
			if err != nil {
				return "", Errorf(CodeFailed, "tool "+name, "encode result: %w", err)
			}
			return string(b), nil
		}}, nil
}

type registeredTool struct {
	Tool
	resolved *jsonschema.Resolved
}

// Tools is a registry of tools. Safe for concurrent use; the zero value is
// not usable, use NewTools.
type Tools struct {
	mu    sync.RWMutex
	tools map[string]registeredTool
}

// NewTools returns an empty tool registry.
func NewTools() *Tools { return &Tools{tools: map[string]registeredTool{}} }

// Register adds tools. A bad name, a missing schema or function, or a name
// already registered is a CodeInvalid error and nothing is added.
func (r *Tools) Register(tools ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	add := make(map[string]registeredTool, len(tools))
	for _, t := range tools {
		if err := checkName("tools.register", "tool", t.Name); err != nil {
			return err
		}
		if t.Call == nil || t.Schema == nil {
			return Errorf(CodeInvalid, "tools.register", "tool %q needs a Schema and a Call function", t.Name)
		}
		if _, dup := r.tools[t.Name]; dup {
			return Errorf(CodeInvalid, "tools.register", "tool %q is already registered", t.Name)
		}
		if _, dup := add[t.Name]; dup {
			return Errorf(CodeInvalid, "tools.register", "tool %q is given twice", t.Name)
		}
		res, err := t.Schema.Resolve(nil)
		if err != nil {
			return Errorf(CodeInvalid, "tools.register", "tool %q schema: %w", t.Name, err)
		}
		add[t.Name] = registeredTool{Tool: t, resolved: res}
	}
	for n, t := range add {
		r.tools[n] = t
	}
	return nil
}

// Names lists the registered tools, sorted.
func (r *Tools) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.tools))
	for n := range r.tools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (r *Tools) get(name string) (registeredTool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	if !ok {
		return registeredTool{}, Errorf(CodeNotFound, "tool", "no tool %q is registered", name)
	}
	return t, nil
}

// Spec returns the model-facing description of tool name.
func (r *Tools) Spec(name string) (ToolSpec, error) {
	t, err := r.get(name)
	if err != nil {
		return ToolSpec{}, err
	}
	return ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema}, nil
}

// Call validates args against the tool's schema and runs it. Arguments that
// do not fit are a CodeInvalid error; the tool's own error is returned as is.
func (r *Tools) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	t, err := r.get(name)
	if err != nil {
		return "", err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var inst any
	if err := json.Unmarshal(args, &inst); err != nil {
		return "", Errorf(CodeInvalid, "tool "+name, "arguments are not JSON: %w", err)
	}
	if err := t.resolved.Validate(inst); err != nil {
		return "", Errorf(CodeInvalid, "tool "+name, "arguments do not fit the schema: %w", err)
	}
	return t.Call(ctx, args)
}
