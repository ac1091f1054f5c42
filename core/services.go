package core

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
)

// Service names a service a kind may be granted in [Permissions].
type Service string

// The services.
const (
	ServiceLLM       Service = "llm"
	ServicePipelines Service = "pipelines"
	ServiceTools     Service = "tools"
	ServiceVector    Service = "vector"
)

// Doc is a document in the vector store.
type Doc struct {
	ID   string            `json:"id"`
	Text string            `json:"text"`
	Meta map[string]string `json:"meta,omitempty"`
}

// Hit is a search result: a document and its cosine similarity to the query.
type Hit struct {
	Doc   Doc     `json:"doc"`
	Score float64 `json:"score"`
}

// Vector is a vector store (core/vector). Implementations must be safe for
// concurrent use.
type Vector interface {
	// Add embeds and stores docs (replacing docs with the same id).
	Add(ctx context.Context, docs ...Doc) error
	// Search returns the k docs most similar to query, best first.
	Search(ctx context.Context, query string, k int) ([]Hit, error)
}

// Services are what a node offers agent logic. Any field may be nil: that
// service is then unavailable (CodeUnavailable). Share one Services between
// kinds; each kind sees it through a [Scope] limited by its [Permissions].
type Services struct {
	LLM       LLM
	Pipelines *Pipelines
	Tools     *Tools
	Vector    Vector
	// Metrics counts tokens per kind (ea_llm_tokens_total); nil counts none.
	Metrics *Metrics
}

// Permissions say what a kind may use. Everything not listed is refused with
// a CodePermission error. "*" in Pipelines or Tools allows every one.
type Permissions struct {
	Services  []Service
	Pipelines []string
	Tools     []string
}

// Scope is a kind's permission-checked view of the services: what its logic
// gets through [From]. A Scope is an [LLM] too, so [GenerateObject] and
// [RunTools] work on it. Its methods are safe for concurrent use.
type Scope struct {
	kind  string
	svc   *Services
	perms Permissions
}

// Scope returns kind's view of s limited by p. A nil s gives a scope where
// every service is unavailable.
func (s *Services) Scope(kind string, p Permissions) *Scope {
	if s == nil {
		s = &Services{}
	}
	return &Scope{kind: kind, svc: s, perms: p}
}

// Kind is the kind this scope belongs to.
func (s *Scope) Kind() string { return s.kind }

// Permissions returns what the scope allows.
func (s *Scope) Permissions() Permissions { return s.perms }

func (s *Scope) allow(op string, svc Service) error {
	if !slices.Contains(s.perms.Services, svc) {
		return Errorf(CodePermission, op, "kind %q may not use service %q (add it to its Permissions.Services)", s.kind, svc)
	}
	return nil
}

func allowed(list []string, name string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, name)
}

// LLM returns the permission-checked LLM (the scope itself), or an error when
// the kind may not use it or none is configured.
func (s *Scope) llm(op string) (LLM, error) {
	if err := s.allow(op, ServiceLLM); err != nil {
		return nil, err
	}
	if s.svc.LLM == nil {
		return nil, Errorf(CodeUnavailable, op, "no LLM is configured")
	}
	return s.svc.LLM, nil
}

// Generate implements [LLM] with a permission check.
func (s *Scope) Generate(ctx context.Context, req Request) (Response, error) {
	m, err := s.llm("llm.generate")
	if err != nil {
		return Response{}, err
	}
	resp, err := m.Generate(ctx, req)
	s.account(ctx, resp.Usage)
	return resp, err
}

// account counts u for the scope's kind and adds it to ctx's tally.
func (s *Scope) account(ctx context.Context, u Usage) {
	if u == (Usage{}) {
		return
	}
	s.svc.Metrics.count(s.kind, u)
	TallyOf(ctx).Add(u)
}

// Stream implements [LLM] with a permission check.
func (s *Scope) Stream(ctx context.Context, req Request) iter.Seq2[Delta, error] {
	m, err := s.llm("llm.stream")
	if err != nil {
		return func(yield func(Delta, error) bool) { yield(Delta{}, err) }
	}
	return func(yield func(Delta, error) bool) {
		for d, err := range m.Stream(ctx, req) {
			if d.Final != nil {
				s.account(ctx, d.Final.Usage)
			}
			if !yield(d, err) || err != nil {
				return
			}
		}
	}
}

// Embed implements [LLM] with a permission check.
func (s *Scope) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	m, err := s.llm("llm.embed")
	if err != nil {
		return nil, err
	}
	return m.Embed(ctx, texts)
}

// Pipeline runs pipeline name on in and decodes its output into out.
func (s *Scope) Pipeline(ctx context.Context, name string, in, out any) error {
	op := "pipeline " + name
	if err := s.allow(op, ServicePipelines); err != nil {
		return err
	}
	if !allowed(s.perms.Pipelines, name) {
		return Errorf(CodePermission, op, "kind %q may not use pipeline %q (add it to its Permissions.Pipelines)", s.kind, name)
	}
	if s.svc.Pipelines == nil {
		return Errorf(CodeUnavailable, op, "no pipelines are configured")
	}
	return s.svc.Pipelines.Call(ctx, name, in, out)
}

// Pipelines lists the pipelines this scope may call.
func (s *Scope) Pipelines() []PipelineInfo {
	if s.svc.Pipelines == nil || !slices.Contains(s.perms.Services, ServicePipelines) {
		return nil
	}
	var out []PipelineInfo
	for _, p := range s.svc.Pipelines.List() {
		if allowed(s.perms.Pipelines, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

func (s *Scope) tools(op string, names ...string) (*Tools, error) {
	if err := s.allow(op, ServiceTools); err != nil {
		return nil, err
	}
	for _, n := range names {
		if !allowed(s.perms.Tools, n) {
			return nil, Errorf(CodePermission, op, "kind %q may not use tool %q (add it to its Permissions.Tools)", s.kind, n)
		}
	}
	if s.svc.Tools == nil {
		return nil, Errorf(CodeUnavailable, op, "no tools are configured")
	}
	return s.svc.Tools, nil
}

// CallTool runs tool name with JSON arguments (validated against its schema).
func (s *Scope) CallTool(ctx context.Context, name string, args json.RawMessage) (string, error) {
	t, err := s.tools("tool "+name, name)
	if err != nil {
		return "", err
	}
	return t.Call(ctx, name, args)
}

// RunTools runs the tool-call loop (see the package function [RunTools]) with
// the named tools, all of which the kind must be allowed, and the scope's LLM.
func (s *Scope) RunTools(ctx context.Context, req Request, tools []string, maxSteps int, opts ...ToolOption) (Response, []Message, error) {
	t, err := s.tools("tools.loop", tools...)
	if err != nil {
		return Response{}, nil, err
	}
	if _, err := s.llm("tools.loop"); err != nil {
		return Response{}, nil, err
	}
	return RunTools(ctx, s, t, req, tools, maxSteps, opts...)
}

func (s *Scope) vector(op string) (Vector, error) {
	if err := s.allow(op, ServiceVector); err != nil {
		return nil, err
	}
	if s.svc.Vector == nil {
		return nil, Errorf(CodeUnavailable, op, "no vector store is configured")
	}
	return s.svc.Vector, nil
}

// AddDocs adds documents to the vector store.
func (s *Scope) AddDocs(ctx context.Context, docs ...Doc) error {
	v, err := s.vector("vector.add")
	if err != nil {
		return err
	}
	return v.Add(ctx, docs...)
}

// Search returns the k documents most similar to query.
func (s *Scope) Search(ctx context.Context, query string, k int) ([]Hit, error) {
	v, err := s.vector("vector.search")
	if err != nil {
		return nil, err
	}
	return v.Search(ctx, query, k)
}

var _ LLM = (*Scope)(nil)

type scopeKey struct{}

// With returns ctx carrying scope; [From] finds it again, also through an
// *actor.Context (which embeds a context.Context).
func With(ctx context.Context, scope *Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// From returns the scope ctx carries: a CodeUnavailable error when there is
// none (the logic was not wrapped with [Wrap] or run with [Run]).
func From(ctx context.Context) (*Scope, error) {
	if s, ok := ctx.Value(scopeKey{}).(*Scope); ok && s != nil {
		return s, nil
	}
	return nil, Errorf(CodeUnavailable, "core.from", "the context carries no agent services: wrap the kind with core.Wrap or run the logic with core.Run")
}
