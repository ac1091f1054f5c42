package llmtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/core/llmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// The raw wire format, as OpenAI sends it.
func TestWireFormat(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Text: "hi"}, llmtest.Reply{Chunks: []string{"a", "b"}}, llmtest.Reply{Status: 429})

	res, body := post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &c); err != nil || res.StatusCode != 200 || c.Object != "chat.completion" ||
		c.Choices[0].Message.Content != "hi" || c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("%d %s", res.StatusCode, body)
	}

	res, body = post(t, srv.URL+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if res.Header.Get("Content-Type") != "text/event-stream" || len(events) != 5 || events[4] != "data: [DONE]" ||
		!strings.Contains(events[1], `"object":"chat.completion.chunk"`) || !strings.Contains(events[1], `"delta":{"content":"a"}`) ||
		!strings.Contains(events[3], `"finish_reason":"stop"`) {
		t.Fatalf("stream body %q", body)
	}

	res, body = post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[]}`)
	if res.StatusCode != 429 || !strings.Contains(body, `"error"`) {
		t.Fatalf("%d %s", res.StatusCode, body)
	}

	res, body = post(t, srv.URL+"/embeddings", `{"model":"e","input":["a b","c"]}`)
	var e struct {
		Object string `json:"object"`
		Data   []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Object != "list" || len(e.Data) != 2 || e.Data[1].Index != 1 || len(e.Data[0].Embedding) != 16 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if got := len(srv.Requests()); got != 4 {
		t.Fatalf("%d requests recorded", got)
	}
	if res, _ := post(t, srv.URL+"/nope", `{}`); res.StatusCode != 404 {
		t.Fatalf("status %d", res.StatusCode)
	}
}

// Usage and streamed tool calls on the wire.
func TestWireUsageAndToolCalls(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Enqueue(
		llmtest.Reply{Text: "two words"},
		llmtest.Reply{Chunks: []string{"a ", "b"}, Usage: &llmtest.Usage{Prompt: 10, Completion: 2}},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":1}`}}},
	)
	_, body := post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"one two three"}]}`)
	if !strings.Contains(body, `"usage":{"completion_tokens":2,"prompt_tokens":3,"total_tokens":5}`) {
		t.Fatalf("usage %s", body)
	}
	_, body = post(t, srv.URL+"/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if len(events) != 6 || events[5] != "data: [DONE]" ||
		!strings.Contains(events[4], `"choices":[]`) || !strings.Contains(events[4], `"prompt_tokens":10`) {
		t.Fatalf("stream with usage %q", body)
	}
	_, body = post(t, srv.URL+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	events = strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	// role, call head, two argument pieces, finish, [DONE]; no usage chunk when not asked.
	if len(events) != 6 || !strings.Contains(events[1], `"tool_calls":[{"function":{"arguments":"","name":"add"},"id":"c1","index":0,"type":"function"}]`) ||
		!strings.Contains(events[2], `"arguments":"{\"a"`) || !strings.Contains(events[4], `"finish_reason":"tool_calls"`) || strings.Contains(body, `"usage"`) {
		t.Fatalf("stream with tool calls %q", body)
	}
}
