package core

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
)

// Pipeline is a named operation input -> output that logic calls by name.
// Input and output travel as JSON so a pipeline can be listed, described and
// called the same way from any kind.
type Pipeline struct {
	Name        string
	Description string
	// Run maps the input (JSON) to the output (JSON).
	Run func(ctx context.Context, in json.RawMessage) (json.RawMessage, error)
}

// NewPipeline builds a pipeline from a typed function.
func NewPipeline[In, Out any](name, description string, fn func(context.Context, In) (Out, error)) (Pipeline, error) {
	if err := checkName("pipeline", "pipeline", name); err != nil {
		return Pipeline{}, err
	}
	if fn == nil {
		return Pipeline{}, Errorf(CodeInvalid, "pipeline", "pipeline %q has no function", name)
	}
	op := "pipeline " + name
	return Pipeline{Name: name, Description: description,
		Run: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			var in In
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, Errorf(CodeInvalid, op, "input does not fit %T: %w", in, err)
			}
			out, err := fn(ctx, in)
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(out)
			if err != nil {
				return nil, Errorf(CodeFailed, op, "encode output: %w", err)
			}
			return b, nil
		}}, nil
}

// PipelineInfo describes a registered pipeline (what discovery lists).
type PipelineInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Pipelines is a registry of pipelines. Safe for concurrent use; create it
// with NewPipelines.
type Pipelines struct {
	mu sync.RWMutex
	m  map[string]Pipeline
}

// NewPipelines returns an empty registry.
func NewPipelines() *Pipelines { return &Pipelines{m: map[string]Pipeline{}} }

// Register adds pipelines; a bad name, a missing function or a duplicate is a
// CodeInvalid error and nothing is added.
func (r *Pipelines) Register(ps ...Pipeline) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	add := map[string]Pipeline{}
	for _, p := range ps {
		if err := checkName("pipelines.register", "pipeline", p.Name); err != nil {
			return err
		}
		if p.Run == nil {
			return Errorf(CodeInvalid, "pipelines.register", "pipeline %q has no Run function", p.Name)
		}
		if _, dup := r.m[p.Name]; dup {
			return Errorf(CodeInvalid, "pipelines.register", "pipeline %q is already registered", p.Name)
		}
		if _, dup := add[p.Name]; dup {
			return Errorf(CodeInvalid, "pipelines.register", "pipeline %q is given twice", p.Name)
		}
		add[p.Name] = p
	}
	for n, p := range add {
		r.m[n] = p
	}
	return nil
}

// List returns the registered pipelines sorted by name: what a node offers.
func (r *Pipelines) List() []PipelineInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]PipelineInfo, 0, len(r.m))
	for _, p := range r.m {
		out = append(out, PipelineInfo{Name: p.Name, Description: p.Description})
	}
	slices.SortFunc(out, func(a, b PipelineInfo) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Call runs pipeline name on in (any JSON-encodable value) and decodes its
// output into out (a pointer; nil to discard).
func (r *Pipelines) Call(ctx context.Context, name string, in, out any) error {
	op := "pipeline " + name
	r.mu.RLock()
	p, ok := r.m[name]
	r.mu.RUnlock()
	if !ok {
		return Errorf(CodeNotFound, op, "no pipeline %q is registered", name)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return Errorf(CodeInvalid, op, "encode input: %w", err)
	}
	res, err := p.Run(ctx, raw)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res, out); err != nil {
		return Errorf(CodeInvalid, op, "output does not fit %T: %w", out, err)
	}
	return nil
}
