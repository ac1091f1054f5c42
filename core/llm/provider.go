package llm

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/internal/tracectx"
)

// Provider is an OpenAI-compatible core.LLM. Safe for concurrent use.
type Provider struct {
	cfg    Config
	client openai.Client
}

var _ core.LLM = (*Provider)(nil)

// New returns a provider for cfg (see Config.Validate).
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		opts = append(opts, option.WithAPIKey("none"))
	}
	return &Provider{cfg: cfg, client: openai.NewClient(opts...)}, nil
}

// Model returns the configured chat model.
func (p *Provider) Model() string { return p.cfg.Model }

// Generate implements core.LLM.
func (p *Provider) Generate(ctx context.Context, req core.Request) (_ core.Response, err error) {
	const op = "llm.generate"
	params, err := p.params(op, req)
	if err != nil {
		return core.Response{}, err
	}
	ctx, span := p.span(ctx, "chat", string(params.Model))
	var out core.Response
	defer func() {
		if span != nil {
			span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", out.Usage.Input), attribute.Int("gen_ai.usage.output_tokens", out.Usage.Output))
		}
		tracectx.End(span, err)
	}()
	err = p.retry(ctx, op, func() error {
		res, err := p.client.Chat.Completions.New(ctx, params)
		if err != nil {
			return err
		}
		if len(res.Choices) == 0 {
			return &StatusError{Status: 200, Message: "answer has no choices"}
		}
		ch := res.Choices[0]
		out = core.Response{Text: ch.Message.Content, FinishReason: ch.FinishReason,
			Usage: core.Usage{Input: int(res.Usage.PromptTokens), Output: int(res.Usage.CompletionTokens)}}
		for _, tc := range ch.Message.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, core.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
		}
		return nil
	})
	return out, err
}

// Stream implements core.LLM. It asks for usage in the stream
// (stream_options.include_usage) and assembles streamed tool calls; the
// final delta holds both. Breaking the loop or ending ctx closes the HTTP
// response at once. A transient failure before the first chunk is retried;
// once text has been yielded a failure ends the stream with its error.
func (p *Provider) Stream(ctx context.Context, req core.Request) iter.Seq2[core.Delta, error] {
	const op = "llm.stream"
	return func(yield func(core.Delta, error) bool) {
		params, err := p.params(op, req)
		if err != nil {
			yield(core.Delta{}, err)
			return
		}
		params.StreamOptions.IncludeUsage = openai.Bool(true)
		ctx, span := p.span(ctx, "chat", string(params.Model))
		if span != nil {
			var failed error
			defer func() { tracectx.End(span, failed) }()
			next := yield
			yield = func(d core.Delta, err error) bool {
				if err != nil {
					failed = err
				}
				return next(d, err)
			}
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for attempt := 1; ; attempt++ {
			stream := p.client.Chat.Completions.NewStreaming(sctx, params)
			started := false
			var final core.Response
			var text strings.Builder
			var calls []*core.ToolCall
			var args []strings.Builder
			for stream.Next() {
				started = true
				c := stream.Current()
				if c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0 {
					final.Usage = core.Usage{Input: int(c.Usage.PromptTokens), Output: int(c.Usage.CompletionTokens)}
				}
				if len(c.Choices) == 0 {
					continue
				}
				ch := c.Choices[0]
				if ch.FinishReason != "" {
					final.FinishReason = ch.FinishReason
				}
				for _, tc := range ch.Delta.ToolCalls {
					i := int(tc.Index)
					if i < 0 || i > 128 {
						continue
					}
					for len(calls) <= i {
						calls = append(calls, &core.ToolCall{})
						args = append(args, strings.Builder{})
					}
					if tc.ID != "" {
						calls[i].ID = tc.ID
					}
					if tc.Function.Name != "" {
						calls[i].Name = tc.Function.Name
					}
					args[i].WriteString(tc.Function.Arguments)
				}
				if ch.Delta.Content == "" {
					continue
				}
				text.WriteString(ch.Delta.Content)
				if !yield(core.Delta{Text: ch.Delta.Content}, nil) {
					cancel()
					_ = stream.Close()
					return
				}
			}
			err := stream.Err()
			_ = stream.Close()
			if err == nil {
				final.Text = text.String()
				for i, c := range calls {
					c.Arguments = json.RawMessage(args[i].String())
					final.ToolCalls = append(final.ToolCalls, *c)
				}
				yield(core.Delta{Final: &final}, nil)
				return
			}
			if !started && attempt < p.cfg.Retry.Attempts && ctx.Err() == nil && transient(err) && p.cfg.Retry.Retryable(err) {
				if werr := p.wait(ctx, attempt); werr != nil {
					yield(core.Delta{}, p.wrap(ctx, op, werr))
					return
				}
				continue
			}
			yield(core.Delta{}, p.wrap(ctx, op, err))
			return
		}
	}
}

// Embed implements core.LLM.
func (p *Provider) Embed(ctx context.Context, texts []string) (_ [][]float32, err error) {
	const op = "llm.embed"
	if len(texts) == 0 {
		return nil, nil
	}
	ctx, span := p.span(ctx, "embeddings", p.cfg.EmbedModel)
	defer func() { tracectx.End(span, err) }()
	params := openai.EmbeddingNewParams{
		Model: openai.EmbeddingModel(p.cfg.EmbedModel),
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
	}
	var out [][]float32
	err = p.retry(ctx, op, func() error {
		res, err := p.client.Embeddings.New(ctx, params)
		if err != nil {
			return err
		}
		if len(res.Data) != len(texts) {
			return &StatusError{Status: 200, Message: "embeddings answer has the wrong number of vectors"}
		}
		out = make([][]float32, len(texts))
		for _, d := range res.Data {
			if d.Index < 0 || int(d.Index) >= len(texts) {
				return &StatusError{Status: 200, Message: "embeddings answer has a bad index"}
			}
			v := make([]float32, len(d.Embedding))
			for i, x := range d.Embedding {
				v[i] = float32(x)
			}
			out[d.Index] = v
		}
		return nil
	})
	return out, err
}

func (p *Provider) params(op string, req core.Request) (openai.ChatCompletionNewParams, error) {
	if len(req.Messages) == 0 {
		return openai.ChatCompletionNewParams{}, core.Errorf(core.CodeInvalid, op, "request has no messages")
	}
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for _, m := range req.Messages {
		switch m.Role {
		case core.RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case core.RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		case core.RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Arguments)},
					}})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case core.RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		default:
			return params, core.Errorf(core.CodeInvalid, op, "message role %q is not system, user, assistant or tool", m.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := toMap(t.Schema)
		if err != nil {
			return params, core.Errorf(core.CodeInvalid, op, "tool %q schema: %w", t.Name, err)
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	if req.Format != nil {
		schema, err := toMap(req.Format.Schema)
		if err != nil {
			return params, core.Errorf(core.CodeInvalid, op, "format schema: %w", err)
		}
		params.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: req.Format.Name, Schema: schema},
		}
	}
	if req.MaxTokens > 0 {
		params.MaxTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	return params, nil
}

func toMap(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{"type": "object"}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// retry runs call up to the policy's attempts while it fails transiently.
func (p *Provider) retry(ctx context.Context, op string, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil {
			return nil
		}
		if attempt >= p.cfg.Retry.Attempts || ctx.Err() != nil || !transient(err) || !p.cfg.Retry.Retryable(err) {
			return p.wrap(ctx, op, err)
		}
		if werr := p.wait(ctx, attempt); werr != nil {
			return p.wrap(ctx, op, werr)
		}
	}
}

// wait sleeps the backoff before retry number attempt, or until ctx ends.
func (p *Provider) wait(ctx context.Context, attempt int) error {
	t := time.NewTimer(p.cfg.Retry.Delay(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// transient reports whether err is worth a retry: 429, 5xx or a transport
// failure (not a context ending).
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *openai.Error
	if errors.As(err, &ae) {
		return ae.StatusCode == 429 || ae.StatusCode >= 500
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Transient()
	}
	return true
}

// wrap turns err into a *core.Error.
func (p *Provider) wrap(ctx context.Context, op string, err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	if ctx.Err() != nil {
		code := core.CodeCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = core.CodeTimeout
		}
		return core.E(code, op, context.Cause(ctx))
	}
	var ae *openai.Error
	if errors.As(err, &ae) {
		return core.E(core.CodeProvider, op, &StatusError{Status: ae.StatusCode, Message: ae.Message, err: err})
	}
	return core.E(core.CodeProvider, op, err)
}

// span starts the client span of one call ("chat <model>", "embeddings
// <model>"), child of the recording span in ctx (the hop's, with tracing on);
// with none it starts nothing and returns a nil span.
func (p *Provider) span(ctx context.Context, op, model string) (context.Context, trace.Span) {
	tr := tracectx.Tracer(ctx, "github.com/effectors/effectors/core/llm")
	if tr == nil {
		return ctx, nil
	}
	return tr.Start(ctx, op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", op), attribute.String("gen_ai.request.model", model)))
}
