package llmtest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/effectors/effectors/core/llm/scripted"
)

// The wire types of the fake, shared with the scripted model of the shipped
// binaries (core/llm/scripted), whose wire this server is too.
type (
	// ToolCall is a tool call the fake model makes.
	ToolCall = scripted.ToolCall
	// Reply is one scripted answer.
	Reply = scripted.Reply
	// Usage is the token counts a reply reports.
	Usage = scripted.Usage
	// Message is a chat message as the client sent it.
	Message = scripted.Message
	// Request is a decoded request the server received.
	Request = scripted.Request
)

// Tokens is how the fake counts tokens: the number of whitespace-separated
// words of s.
func Tokens(s string) int { return scripted.Tokens(s) }

// PromptTokens is the input usage the fake reports for req by default: the
// words of every message's text, tool call arguments included.
func PromptTokens(req Request) int { return scripted.PromptTokens(req) }

// CompletionTokens is the output usage the fake reports for rep by default.
func CompletionTokens(rep Reply) int { return scripted.CompletionTokens(rep) }

// HashEmbedding returns a deterministic bag-of-words embedding of dim
// dimensions: texts sharing words have a high cosine similarity.
func HashEmbedding(dim int) func(string) []float32 { return scripted.HashEmbedding(dim) }

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
	s.srv = httptest.NewServer(&scripted.Handler{
		Reply:        s.next,
		Embed:        s.embeddings,
		Stop:         s.stop,
		Disconnected: func() { s.disconnects <- struct{}{} },
	})
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

// embeddings records req and embeds texts with the Embedder.
func (s *Server) embeddings(req Request, texts []string) [][]float32 {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	embed := s.embed
	s.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = embed(t)
	}
	return out
}
