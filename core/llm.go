package core

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/google/jsonschema-go/jsonschema"
)

// Role of a chat message.
type Role string

// Roles of chat messages.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one chat message.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	Schema      *jsonschema.Schema `json:"schema,omitempty"`
}

// Format asks for an answer in JSON fitting Schema (structured output).
type Format struct {
	// Name of the format, [A-Za-z0-9_-]{1,64}.
	Name   string
	Schema *jsonschema.Schema
}

// Request is one chat-completion request.
type Request struct {
	// Model overrides the provider's configured model when set.
	Model    string
	Messages []Message
	// Tools the model may call.
	Tools []ToolSpec
	// Format asks for structured output; nil for text.
	Format *Format
	// MaxTokens bounds the answer; 0 for the provider's default.
	MaxTokens int
	// Temperature; nil for the provider's default.
	Temperature *float64
}

// Prompt is a request with an optional system message and one user message.
func Prompt(system, user string) Request {
	var r Request
	if system != "" {
		r.Messages = append(r.Messages, Message{Role: RoleSystem, Content: system})
	}
	r.Messages = append(r.Messages, Message{Role: RoleUser, Content: user})
	return r
}

// Response is a model's answer.
type Response struct {
	// Text is the answer's content.
	Text string
	// ToolCalls are the tools the model asks to run (then Text may be empty).
	ToolCalls []ToolCall
	// FinishReason as the provider reports it (stop, length, tool_calls, …).
	FinishReason string
	// Usage is the tokens the request took, as the provider reports them
	// (zero when it reports none).
	Usage Usage
}

// Usage counts the tokens of one or more requests.
type Usage struct {
	// Input is the prompt tokens.
	Input int `json:"input"`
	// Output is the completion tokens.
	Output int `json:"output"`
}

// Total is Input + Output.
func (u Usage) Total() int { return u.Input + u.Output }

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{Input: u.Input + v.Input, Output: u.Output + v.Output}
}

// Delta is one piece of a streamed answer: text as it arrives and, on the
// last delta of a stream that ended well, the whole Response (its text, the
// tool calls assembled from their pieces, the finish reason and the usage).
type Delta struct {
	// Text is the text that arrived; empty on the final delta.
	Text string
	// Final is set on the last delta only.
	Final *Response
}

// Message returns the response as an assistant message for the conversation.
func (r Response) Message() Message {
	return Message{Role: RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls}
}

// LLM is a language-model provider. Implementations (core/llm) must be safe for
// concurrent use, return *Error values (CodeProvider, CodeCancelled, …), and
// stop all network work when ctx ends.
type LLM interface {
	// Generate returns the model's answer to req.
	Generate(ctx context.Context, req Request) (Response, error)
	// Stream yields the answer as it arrives: deltas with text, then one
	// delta whose Final holds the whole response with its usage. Breaking
	// the loop or ending ctx closes the underlying HTTP stream at once. An
	// error is the last value yielded (then there is no final delta).
	Stream(ctx context.Context, req Request) iter.Seq2[Delta, error]
	// Embed returns one embedding per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// StreamText yields only the text of m's streamed answer to req; usage (if
// the caller wants it) is in the final delta of [LLM.Stream].
func StreamText(ctx context.Context, m LLM, req Request) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for d, err := range m.Stream(ctx, req) {
			if err != nil {
				yield("", err)
				return
			}
			if d.Text != "" && !yield(d.Text, nil) {
				return
			}
		}
	}
}

// SchemaFor derives the JSON schema of Go type T (fields named by json tags,
// descriptions from jsonschema tags, additional properties refused).
func SchemaFor[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, Errorf(CodeInvalid, "schema", "derive JSON schema of %T: %w", *new(T), err)
	}
	return s, nil
}

// GenerateObject asks m for an answer that fits Go type T: the JSON schema is
// derived from T and sent as the response format; the answer is validated
// against it and decoded. An answer that does not fit is an *Error with
// CodeSchema whose cause is a *SchemaError holding the answer.
func GenerateObject[T any](ctx context.Context, m LLM, req Request) (T, error) {
	var zero T
	if m == nil {
		return zero, Errorf(CodeUnavailable, "llm.object", "no LLM configured")
	}
	schema, err := SchemaFor[T]()
	if err != nil {
		return zero, err
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return zero, Errorf(CodeInvalid, "llm.object", "resolve schema: %w", err)
	}
	req.Format = &Format{Name: "answer", Schema: schema}
	resp, err := m.Generate(ctx, req)
	if err != nil {
		return zero, err
	}
	v, err := decodeFitting[T](resolved, resp.Text)
	if err != nil {
		return zero, E(CodeSchema, "llm.object", err)
	}
	return v, nil
}

// decodeFitting validates text against resolved and decodes it into T.
func decodeFitting[T any](resolved *jsonschema.Resolved, text string) (T, error) {
	var zero T
	var inst any
	if err := json.Unmarshal([]byte(text), &inst); err != nil {
		return zero, &SchemaError{Answer: text, Err: fmt.Errorf("not JSON: %w", err)}
	}
	if err := resolved.Validate(inst); err != nil {
		return zero, &SchemaError{Answer: text, Err: err}
	}
	var v T
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return zero, &SchemaError{Answer: text, Err: err}
	}
	return v, nil
}
