package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Handler serves the chat-completions and embeddings wire format of the
// OpenAI API (see the package doc) with answers from Reply and Embed. It is
// the wire of both the scripted model ([New]) and the fake server of tests
// (core/llmtest).
type Handler struct {
	// Reply answers a chat-completion request. It may be called from many
	// goroutines at once. Required.
	Reply func(Request) Reply
	// Embed answers an embeddings request: one vector per text, in order.
	// Required.
	Embed func(req Request, texts []string) [][]float32
	// Stop, when closed, releases the streams a Reply with Hang holds.
	Stop <-chan struct{}
	// Disconnected, when set, is called each time a client closes a held
	// (Hang) stream.
	Disconnected func()
}

// ServeHTTP answers POST <base>/chat/completions and POST <base>/embeddings.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	req.Path = r.URL.Path
	req.Authorization = r.Header.Get("Authorization")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		h.chat(w, r, req)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/embeddings"):
		h.embeddings(w, req)
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

func (h *Handler) chat(w http.ResponseWriter, r *http.Request, req Request) {
	rep := h.Reply(req)
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
		if rep.Pace > 0 {
			select {
			case <-time.After(rep.Pace):
			case <-r.Context().Done():
				return
			}
		}
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
			if h.Disconnected != nil {
				h.Disconnected()
			}
		case <-h.Stop:
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

func (h *Handler) embeddings(w http.ResponseWriter, req Request) {
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
	vecs := h.Embed(req, texts)
	var data []any
	for i, v := range vecs {
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": 1, "total_tokens": 1}})
}
