package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// ToolCall is a tool call the fake model makes.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Reply is one scripted answer.
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
}

// Usage is the token counts a reply reports.
type Usage struct {
	Prompt     int
	Completion int
}

// Tokens is how the fake counts tokens: the number of whitespace-separated
// words of s.
func Tokens(s string) int { return len(strings.Fields(s)) }

// PromptTokens is the input usage the fake reports for req by default: the
// words of every message's text, tool call arguments included.
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

// CompletionTokens is the output usage the fake reports for rep by default.
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

// Request is a decoded request the server received.
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

// Server is a fake OpenAI-compatible endpoint.
type Server struct {
	// URL is the base URL to configure clients with (ends in /v1).
	URL string

	srv         *httptest.Server
	stop        chan struct{}
	closeOnce   sync.Once
	disconnects chan struct{}

	mu      sync.Mutex
	queue   []Reply
	respond func(Request) Reply
	embed   func(string) []float32
	reqs    []Request
}

// NewServer starts a fake server; it is closed when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake server outside a test (in an Example, say); Close it.
func Start() *Server {
	s := &Server{stop: make(chan struct{}), disconnects: make(chan struct{}, 1024), embed: HashEmbedding(16)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close releases held streams and shuts the server down. Safe to call more
// than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.srv.Close()
	})
}

// Enqueue adds replies, answered in order before the responder is asked.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// Respond sets the function that answers when the queue is empty. It may be
// called from many goroutines at once.
func (s *Server) Respond(fn func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = fn
}

// Embedder sets how texts map to embeddings (default HashEmbedding(16)).
func (s *Server) Embedder(fn func(string) []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embed = fn
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Disconnects receives one value each time a client closes a held (Hang)
// streaming response.
func (s *Server) Disconnects() <-chan struct{} { return s.disconnects }

// WaitDisconnect waits for a client to close a held stream, or for ctx.
func (s *Server) WaitDisconnect(ctx context.Context) error {
	select {
	case <-s.disconnects:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no client closed a held stream: %w", ctx.Err())
	}
}

func (s *Server) next(req Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		return r
	}
	if s.respond != nil {
		fn := s.respond
		s.mu.Unlock()
		defer s.mu.Lock()
		return fn(req)
	}
	return Reply{Text: "ok"}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	req.Path = r.URL.Path
	req.Authorization = r.Header.Get("Authorization")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.chat(w, r, req)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/embeddings"):
		s.embeddings(w, req)
	default:
		writeError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": "fake_error", "param": nil, "code": fmt.Sprint(status)}})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, req Request) {
	rep := s.next(req)
	if rep.Status != 0 && rep.Status != http.StatusOK {
		writeError(w, rep.Status, fmt.Sprintf("fake status %d", rep.Status))
		return
	}
	model := req.Model
	created := time.Now().Unix()
	usage := Usage{Prompt: PromptTokens(req), Completion: CompletionTokens(rep)}
	if rep.Usage != nil {
		usage = *rep.Usage
	}
	usageJSON := map[string]any{"prompt_tokens": usage.Prompt, "completion_tokens": usage.Completion, "total_tokens": usage.Prompt + usage.Completion}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.Text, "refusal": nil}
		finish := "stop"
		if len(rep.ToolCalls) > 0 {
			var calls []map[string]any
			for i, c := range rep.ToolCalls {
				id := c.ID
				if id == "" {
					id = fmt.Sprintf("call_%d", i)
				}
				calls = append(calls, map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
			}
			msg["tool_calls"] = calls
			if rep.Text == "" {
				msg["content"] = nil
			}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   usageJSON,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	chunks := rep.Chunks
	if len(chunks) == 0 && rep.Text != "" {
		chunks = splitWords(rep.Text)
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	for _, c := range chunks {
		if !send(chunk(map[string]any{"content": c}, nil)) {
			return
		}
	}
	for i, c := range rep.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		head := map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}
		if !send(chunk(head, nil)) {
			return
		}
		for _, piece := range splitHalves(c.Arguments) {
			part := map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}
			if !send(chunk(part, nil)) {
				return
			}
		}
	}
	switch {
	case rep.Hang:
		select {
		case <-r.Context().Done():
			s.disconnects <- struct{}{}
		case <-s.stop:
		}
		return
	case rep.FailStream:
		send(map[string]any{"error": map[string]any{"message": "fake failure in the stream", "type": "server_error"}})
		return
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	send(chunk(map[string]any{}, finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usageJSON})
	}
	if _, err := fmt.Fprint(w, "data: [DONE]\n\n"); err == nil && fl != nil {
		fl.Flush()
	}
}

// splitHalves splits s in two pieces (one when it is short), as providers
// stream tool arguments in pieces.
func splitHalves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// splitWords splits text into word chunks that keep their spaces.
func splitWords(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	return append(out, text[start:])
}

func (s *Server) embeddings(w http.ResponseWriter, req Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	embed := s.embed
	s.mu.Unlock()
	var texts []string
	switch in := req.Input.(type) {
	case string:
		texts = []string{in}
	case []any:
		for _, x := range in {
			if str, ok := x.(string); ok {
				texts = append(texts, str)
			}
		}
	}
	if len(texts) == 0 {
		writeError(w, http.StatusBadRequest, "input must be a string or a list of strings")
		return
	}
	var data []any
	for i, t := range texts {
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": embed(t)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": 1, "total_tokens": 1}})
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
