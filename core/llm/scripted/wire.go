package scripted

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"strings"
	"time"
)

// ToolCall is a tool call the model makes.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Reply is one answer of the model, as [Handler] puts it on the wire.
type Reply struct {
	// Status, when not 0 or 200, answers with that HTTP status and an error
	// body (429 and 5xx are what clients retry).
	Status int
	// Text is the answer. Streamed as Chunks, or word by word when Chunks is empty.
	Text string
	// Chunks are the streamed pieces of the answer (streaming only).
	Chunks []string
	// ToolCalls the model asks for. Streamed as the real API does: each
	// call's id and name first, then its arguments in pieces.
	ToolCalls []ToolCall
	// Usage overrides the token counts reported; nil counts words (see
	// Tokens): the prompt's messages for input, the answer's text and tool
	// arguments for output.
	Usage *Usage
	// Hang (streaming) keeps the response open after the chunks until the
	// client closes the connection.
	Hang bool
	// FailStream (streaming) sends an error event after the chunks.
	FailStream bool
	// Pace (streaming) is the wait before each chunk of text, as a model
	// takes time for each token; 0 sends them at once.
	Pace time.Duration
}

// Usage is the token counts a reply reports.
type Usage struct {
	Prompt     int
	Completion int
}

// Tokens is how the handler counts tokens: the number of
// whitespace-separated words of s.
func Tokens(s string) int { return len(strings.Fields(s)) }

// PromptTokens is the input usage reported for req by default: the words of
// every message's text, tool call arguments included.
func PromptTokens(req Request) int {
	n := 0
	for _, m := range req.Messages {
		n += Tokens(m.Text())
		for _, c := range m.ToolCalls {
			n += Tokens(c.Function.Arguments)
		}
	}
	return n
}

// CompletionTokens is the output usage reported for rep by default.
func CompletionTokens(rep Reply) int {
	text := rep.Text
	if len(rep.Chunks) > 0 {
		text = strings.Join(rep.Chunks, "")
	}
	n := Tokens(text)
	for _, c := range rep.ToolCalls {
		n += Tokens(c.Arguments)
	}
	return n
}

// Message is a chat message as the client sent it.
type Message struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls,omitempty"`
}

// Text returns the message content as a string (content parts joined).
func (m Message) Text() string {
	switch c := m.Content.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if mp, ok := p.(map[string]any); ok {
				if s, ok := mp["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

// Request is a decoded request of the chat-completions or embeddings API.
type Request struct {
	// Path is the URL path, e.g. /v1/chat/completions.
	Path string
	// Authorization is the Authorization header.
	Authorization string
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream"`
	// StreamOptions as the client sent them; include_usage asks for a last
	// chunk with the usage, as the real API sends it.
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	// Input is the embeddings input.
	Input any `json:"input,omitempty"`
}

// System returns the first system (or developer) message's text.
func (r Request) System() string {
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			return m.Text()
		}
	}
	return ""
}

// LastUser returns the last user message's text.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// HashEmbedding returns a deterministic bag-of-words embedding of dim
// dimensions: texts sharing words have a high cosine similarity.
func HashEmbedding(dim int) func(string) []float32 {
	return func(text string) []float32 {
		v := make([]float32, dim)
		for _, w := range strings.Fields(strings.ToLower(text)) {
			h := fnv.New32a()
			_, _ = h.Write([]byte(strings.Trim(w, ".,;:!?")))
			v[h.Sum32()%uint32(dim)]++
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if n > 0 {
			n = math.Sqrt(n)
			for i := range v {
				v[i] = float32(float64(v[i]) / n)
			}
		}
		return v
	}
}
