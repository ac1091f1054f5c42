package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newProvider(t *testing.T, srv *llmtest.Server) *llm.Provider {
	t.Helper()
	p, err := llm.New(llm.Config{BaseURL: srv.URL, Model: "fake-model", APIKey: "k1",
		Retry: llm.Retry{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  llm.Config
		ok   bool
	}{
		{"ok", llm.Config{BaseURL: "http://x/v1", Model: "m"}, true},
		{"no url", llm.Config{Model: "m"}, false},
		{"bad url", llm.Config{BaseURL: "ftp://x", Model: "m"}, false},
		{"no model", llm.Config{BaseURL: "http://x/v1"}, false},
		{"negative retry", llm.Config{BaseURL: "http://x/v1", Model: "m", Retry: llm.Retry{Attempts: -1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llm.New(tc.cfg)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, llm.ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(llm.EnvBaseURL, "http://h/v1")
	t.Setenv(llm.EnvModel, "m")
	t.Setenv(llm.EnvAPIKey, "key")
	t.Setenv(llm.EnvEmbedModel, "e")
	got := llm.ConfigFromEnv()
	if got.BaseURL != "http://h/v1" || got.Model != "m" || got.APIKey != "key" || got.EmbedModel != "e" {
		t.Fatalf("ConfigFromEnv = %+v", got)
	}
}

func TestGenerate(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Text: "hello there"})
	res, err := p.Generate(t.Context(), core.Prompt("be brief", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "hello there" || res.FinishReason != "stop" {
		t.Fatalf("response = %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Model != "fake-model" || r.Authorization != "Bearer k1" || r.Stream {
		t.Fatalf("request = %+v", r)
	}
	if r.System() != "be brief" || r.LastUser() != "hi" || len(r.Messages) != 2 {
		t.Fatalf("messages = %+v", r.Messages)
	}
}

type verdict struct {
	Approve bool     `json:"approve"`
	Reasons []string `json:"reasons"`
	Score   int      `json:"score"`
}

func TestGenerateObject(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Text: `{"approve":true,"reasons":["short","clear"],"score":7}`})
	v, err := core.GenerateObject[verdict](t.Context(), p, core.Prompt("", "judge"))
	if err != nil {
		t.Fatal(err)
	}
	if !v.Approve || v.Score != 7 || strings.Join(v.Reasons, ",") != "short,clear" {
		t.Fatalf("verdict = %+v", v)
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string `json:"name"`
			Schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(srv.Requests()[0].ResponseFormat, &rf); err != nil {
		t.Fatal(err)
	}
	if rf.Type != "json_schema" || rf.JSONSchema.Name != "answer" || rf.JSONSchema.Schema.Type != "object" ||
		len(rf.JSONSchema.Schema.Properties) != 3 || len(rf.JSONSchema.Schema.Required) != 3 {
		t.Fatalf("response_format = %s", srv.Requests()[0].ResponseFormat)
	}

	for _, bad := range []string{`not json`, `{"approve":"yes","reasons":[],"score":1}`, `{"approve":true,"reasons":[]}`, `{"approve":true,"reasons":[],"score":1,"extra":2}`} {
		srv.Enqueue(llmtest.Reply{Text: bad})
		_, err := core.GenerateObject[verdict](t.Context(), p, core.Prompt("", "judge"))
		var se *core.SchemaError
		if !errors.Is(err, core.ErrSchema) || !errors.As(err, &se) || se.Answer != bad {
			t.Fatalf("answer %q: err = %v, want a schema error holding the answer", bad, err)
		}
	}
}

func TestStream(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Chunks: []string{"one ", "two ", "three"}})
	var got []string
	var final *core.Response
	for d, err := range p.Stream(t.Context(), core.Prompt("", "count to three")) {
		if err != nil {
			t.Fatal(err)
		}
		if final != nil {
			t.Fatal("a delta after the final one")
		}
		if d.Final != nil {
			final = d.Final
			continue
		}
		got = append(got, d.Text)
	}
	if strings.Join(got, "|") != "one |two |three" {
		t.Fatalf("chunks = %q", got)
	}
	req := srv.Requests()[0]
	if !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		t.Fatalf("request was not a streaming request asking for usage: %+v", req)
	}
	want := core.Response{Text: "one two three", FinishReason: "stop", Usage: core.Usage{Input: 3, Output: 3}}
	if final == nil || final.Text != want.Text || final.FinishReason != want.FinishReason || final.Usage != want.Usage {
		t.Fatalf("final %+v, want %+v", final, want)
	}
}

// Usage on a plain response, as the provider reports it.
func TestUsage(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Text: "four words of answer"}, llmtest.Reply{Text: "x", Usage: &llmtest.Usage{Prompt: 120, Completion: 7}})
	res, err := p.Generate(t.Context(), core.Prompt("be brief", "two words"))
	if err != nil || res.Usage != (core.Usage{Input: 4, Output: 4}) || res.Usage.Total() != 8 {
		t.Fatalf("res %+v err %v", res, err)
	}
	res, err = p.Generate(t.Context(), core.Prompt("", "x"))
	if err != nil || res.Usage != (core.Usage{Input: 120, Output: 7}) {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// Tool calls streamed in pieces are assembled in the final delta.
func TestStreamToolCalls(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Text: "let me add", ToolCalls: []llmtest.ToolCall{
		{ID: "c1", Name: "add", Arguments: `{"a":1,"b":2}`},
		{ID: "c2", Name: "mul", Arguments: `{"a":3,"b":4}`},
	}})
	var final *core.Response
	var text string
	for d, err := range p.Stream(t.Context(), core.Prompt("", "x")) {
		if err != nil {
			t.Fatal(err)
		}
		text += d.Text
		if d.Final != nil {
			final = d.Final
		}
	}
	if final == nil || text != "let me add" || final.FinishReason != "tool_calls" || len(final.ToolCalls) != 2 {
		t.Fatalf("final %+v text %q", final, text)
	}
	if c := final.ToolCalls[1]; c.ID != "c2" || c.Name != "mul" || string(c.Arguments) != `{"a":3,"b":4}` {
		t.Fatalf("call %+v (%s)", c, c.Arguments)
	}
	if final.Usage.Output != 3+2 {
		t.Fatalf("usage %+v", final.Usage)
	}
}

// Breaking the loop closes the HTTP stream: the server sees the connection go.
func TestStreamBreakClosesConnection(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Chunks: []string{"a", "b"}, Hang: true})
	n := 0
	for _, err := range p.Stream(t.Context(), core.Prompt("", "x")) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 2 {
			break
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := srv.WaitDisconnect(ctx); err != nil {
		t.Fatal(err)
	}
}

// Cancelling the context ends the stream with CodeCancelled and closes the connection.
func TestStreamCancelClosesConnection(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Chunks: []string{"a"}, Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var last error
	var text string
	for chunk, err := range core.StreamText(ctx, p, core.Prompt("", "x")) {
		if err != nil {
			last = err
			break
		}
		text += chunk
		cancel()
	}
	if text != "a" || !errors.Is(last, core.ErrCancelled) || !errors.Is(last, context.Canceled) {
		t.Fatalf("text %q, err %v", text, last)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	if err := srv.WaitDisconnect(wctx); err != nil {
		t.Fatal(err)
	}
}

func TestStreamFailsMidway(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Chunks: []string{"par", "tial"}, FailStream: true})
	var text string
	var last error
	for chunk, err := range core.StreamText(t.Context(), p, core.Prompt("", "x")) {
		if err != nil {
			last = err
			continue
		}
		text += chunk
	}
	if text != "partial" || !errors.Is(last, core.ErrProvider) {
		t.Fatalf("text %q err %v", text, last)
	}
	if len(srv.Requests()) != 1 {
		t.Fatal("a stream that already yielded text was retried")
	}
}

func TestRetryTransient(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Status: 429}, llmtest.Reply{Status: 503}, llmtest.Reply{Text: "finally"})
	res, err := p.Generate(t.Context(), core.Prompt("", "x"))
	if err != nil || res.Text != "finally" || len(srv.Requests()) != 3 {
		t.Fatalf("res %+v err %v requests %d", res, err, len(srv.Requests()))
	}
	// Streams retry before their first chunk too.
	srv.Enqueue(llmtest.Reply{Status: 502}, llmtest.Reply{Text: "streamed ok"})
	var text string
	for c, err := range core.StreamText(t.Context(), p, core.Prompt("", "x")) {
		if err != nil {
			t.Fatal(err)
		}
		text += c
	}
	if text != "streamed ok" {
		t.Fatalf("text %q", text)
	}
}

func TestRetryGivesUp(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Status: 500}, llmtest.Reply{Status: 500}, llmtest.Reply{Status: 500}, llmtest.Reply{Text: "never"})
	_, err := p.Generate(t.Context(), core.Prompt("", "x"))
	var se *llm.StatusError
	if !errors.Is(err, core.ErrProvider) || !errors.As(err, &se) || se.Status != 500 || len(srv.Requests()) != 3 {
		t.Fatalf("err %v, requests %d", err, len(srv.Requests()))
	}
}

func TestNoRetryOnClientError(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	srv.Enqueue(llmtest.Reply{Status: 400}, llmtest.Reply{Text: "never"})
	_, err := p.Generate(t.Context(), core.Prompt("", "x"))
	var se *llm.StatusError
	if !errors.As(err, &se) || se.Status != 400 || se.Transient() || len(srv.Requests()) != 1 {
		t.Fatalf("err %v requests %d", err, len(srv.Requests()))
	}
}

func TestGenerateTimeout(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := p.Generate(ctx, core.Prompt("", "x"))
	if !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
}

func TestInvalidRequest(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	if _, err := p.Generate(t.Context(), core.Request{}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	_, err := p.Generate(t.Context(), core.Request{Messages: []core.Message{{Role: "robot", Content: "x"}}})
	if !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
}

func TestEmbed(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := newProvider(t, srv)
	vs, err := p.Embed(t.Context(), []string{"red apple", "green apple", "fast car"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || len(vs[0]) != 16 {
		t.Fatalf("vectors %d×%d", len(vs), len(vs[0]))
	}
	want := llmtest.HashEmbedding(16)("green apple")
	for i := range want {
		if vs[1][i] != want[i] {
			t.Fatalf("vector 1 = %v, want %v", vs[1], want)
		}
	}
	if r := srv.Requests()[0]; r.Path != "/v1/embeddings" || r.Model != "fake-model" {
		t.Fatalf("request %+v", r)
	}
}
