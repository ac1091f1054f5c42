package core_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
)

func TestParseToolFileErrors(t *testing.T) {
	env := func(k string) string { return map[string]string{"TOKEN": "t0k"}[k] }
	nats := `"nats": {"subject": "weather.forecast"}`
	for _, tc := range []struct{ doc, want string }{
		{``, "want JSON"},
		{`{"tools": []}`, "no tools"},
		{`{"tools": [{"name": "w", "description": "d", ` + nats + `}], "extra": 1}`, `unknown field "extra"`},
		{`{"tools": [{"name": "w", "description": "d", ` + nats + `}]} {}`, "trailing data"},
		{`{"tools": [{"name": "w x", "description": "d", ` + nats + `}]}`, `tool name "w x" must match`},
		{`{"tools": [{"name": "w", ` + nats + `}]}`, `tool "w": no description`},
		{`{"tools": [{"name": "w", "description": "d"}]}`, `tool "w": want exactly one of "nats"`},
		{`{"tools": [{"name": "w", "description": "d", ` + nats + `, "http": {"url": "http://x"}}]}`, "want exactly one of"},
		{`{"tools": [{"name": "w", "description": "d", "nats": {"subject": "a.*"}}]}`, `nats subject "a.*": want dot-separated tokens without wildcards`},
		{`{"tools": [{"name": "w", "description": "d", "nats": {"subject": "$JS.API.STREAM.DELETE.EA_MBOX"}}]}`, `a $ subject (the server's own API)`},
		{`{"tools": [{"name": "w", "description": "d", "http": {"url": "ftp://x"}}]}`, `http url "ftp://x": want an http(s) URL`},
		{`{"tools": [{"name": "w", "description": "d", "http": {"url": "http://x", "method": "DELETE"}}]}`, `http method "DELETE": want POST, PUT or GET`},
		{`{"tools": [{"name": "w", "description": "d", "http": {"url": "http://x", "headers": {"A": "${NOPE}"}}}]}`, "names the environment variable NOPE, which is not set"},
		{`{"tools": [{"name": "w", "description": "d", ` + nats + `, "schema": {"type": "string"}}]}`, `want a JSON schema of an object`},
		{`{"tools": [{"name": "w", "description": "d", ` + nats + `, "timeout": "soon"}]}`, `timeout "soon": want a positive duration`},
		{`{"tools": [{"name": "w", "description": "d", ` + nats + `}, {"name": "w", "description": "e", ` + nats + `}]}`, `tool "w" is described twice`},
	} {
		_, err := core.ParseToolFile([]byte(tc.doc), env)
		if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant an invalid error with %q", tc.doc, err, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(`{"tools": [{"name": "w", "description": "d", "http": {"url": "http://x", "headers": {"Authorization": "Bearer ${TOKEN}"}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := core.LoadToolFile(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if h := tf.Tools[0].HTTP; h.Headers["Authorization"] != "Bearer t0k" || h.Method != http.MethodPost {
		t.Errorf("http %+v: want the header expanded and POST by default", h)
	}
	if _, err := core.LoadToolFile(filepath.Join(t.TempDir(), "none.json"), env); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("a missing file: %v", err)
	}
}

// tools registers the tools of doc.
func serviceTools(t *testing.T, nc *nats.Conn, doc string) *core.Tools {
	t.Helper()
	tf, err := core.ParseToolFile([]byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	built, err := tf.Build(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := core.NewTools()
	if err := reg.Register(built...); err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestServiceToolNATS(t *testing.T) {
	nc := bustest.NewServer(t).Connect(t).NATS()
	svc, err := micro.AddService(nc, micro.Config{Name: "weather", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	add := func(subject string, h micro.HandlerFunc) {
		if err := svc.AddEndpoint(strings.ReplaceAll(subject, ".", "_"), h, micro.WithEndpointSubject(subject)); err != nil {
			t.Fatal(err)
		}
	}
	add("weather.forecast", func(r micro.Request) {
		var in struct{ City string }
		if json.Unmarshal(r.Data(), &in) != nil || r.Headers().Get("Content-Type") != "application/json" {
			_ = r.Error("400", "bad request", nil)
			return
		}
		_ = r.Respond([]byte("sunny in " + in.City))
	})
	add("weather.broken", func(r micro.Request) { _ = r.Error("503", "station offline", nil) })
	add("weather.silent", func(r micro.Request) {}) // never answers
	add("weather.huge", func(r micro.Request) { _ = r.Respond(make([]byte, core.MaxServiceResult+1)) })

	tools := serviceTools(t, nc, `{"tools": [
		{"name": "forecast", "description": "d", "nats": {"subject": "weather.forecast"},
		 "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
		{"name": "broken", "description": "d", "nats": {"subject": "weather.broken"}},
		{"name": "silent", "description": "d", "nats": {"subject": "weather.silent"}, "timeout": "100ms"},
		{"name": "huge", "description": "d", "nats": {"subject": "weather.huge"}},
		{"name": "nobody", "description": "d", "nats": {"subject": "weather.nobody"}}]}`)
	ctx := t.Context()
	if out, err := tools.Call(ctx, "forecast", json.RawMessage(`{"city":"Oslo"}`)); err != nil || out != "sunny in Oslo" {
		t.Errorf("forecast: %q %v", out, err)
	}
	if _, err := tools.Call(ctx, "forecast", json.RawMessage(`{}`)); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("arguments without the required city: %v, want invalid before any request", err)
	}
	for name, want := range map[string]string{
		"broken": "the service answered error 503: station offline",
		"silent": "did not answer within 100ms",
		"huge":   "more than the 262144 a tool result may be",
		"nobody": "no service answers on weather.nobody",
	} {
		_, err := tools.Call(ctx, name, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
		// The tool-call loop hands these to the model; only cancellation,
		// timeout of the caller and permission end it.
		if c := core.CodeOf(err); c == core.CodeCancelled || c == core.CodeTimeout || c == core.CodePermission {
			t.Errorf("%s: code %s would end the tool-call loop", name, c)
		}
	}
	if _, err := (core.ServiceTool{Name: "n", Description: "d", NATS: &core.NATSService{Subject: "a.b"}}).Tool(nil, nil); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("a NATS tool without a connection: %v", err)
	}
}

func TestServiceToolHTTP(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/post":
			var in map[string]any
			if r.Header.Get("X-Key") != "k" || r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil {
				http.Error(w, "no", http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte("posted " + in["city"].(string)))
		case "/get":
			_, _ = w.Write([]byte(r.Method + " " + r.URL.RawQuery))
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	}))
	defer s.Close()
	tools := serviceTools(t, nil, `{"tools": [
		{"name": "post", "description": "d", "http": {"url": "`+s.URL+`/post", "headers": {"X-Key": "k"}}},
		{"name": "get", "description": "d", "http": {"url": "`+s.URL+`/get?v=1", "method": "get"}},
		{"name": "missing", "description": "d", "http": {"url": "`+s.URL+`/missing?secret=s3"}}]}`)
	ctx := t.Context()
	if out, err := tools.Call(ctx, "post", json.RawMessage(`{"city":"Rome"}`)); err != nil || out != "posted Rome" {
		t.Errorf("post: %q %v", out, err)
	}
	if out, err := tools.Call(ctx, "get", json.RawMessage(`{"city":"Rome","days":3,"metric":true}`)); err != nil || out != "GET city=Rome&days=3&metric=true&v=1" {
		t.Errorf("get: %q %v", out, err)
	}
	if _, err := tools.Call(ctx, "get", json.RawMessage(`{"where":{"city":"Rome"}}`)); err == nil || !strings.Contains(err.Error(), "send it with POST") {
		t.Errorf("get with an object argument: %v", err)
	}
	_, err := tools.Call(ctx, "missing", nil)
	if err == nil || !strings.Contains(err.Error(), "answered 404 Not Found: no such page") || strings.Contains(err.Error(), "s3") {
		t.Errorf("missing: %v, want the status and body, not the query", err)
	}
}

// TestServiceToolInLoop: the model of the tool-call loop calls a NATS
// service and answers from its result.
func TestServiceToolInLoop(t *testing.T) {
	nc := bustest.NewServer(t).Connect(t).NATS()
	sub, err := nc.Subscribe("weather.forecast", func(m *nats.Msg) { _ = m.Respond([]byte(`{"forecast":"rain"}`)) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	tools := serviceTools(t, nc, `{"tools": [{"name": "weather", "description": "forecast", "nats": {"subject": "weather.forecast"}}]}`)
	fake := llmtest.NewServer(t)
	fake.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "weather", Arguments: `{"city":"Bergen"}`}}},
		llmtest.Reply{Text: "Take an umbrella."})
	res, _, err := core.RunTools(t.Context(), provider(t, fake), tools, core.Prompt("", "weather?"), []string{"weather"}, 4)
	if err != nil || res.Text != "Take an umbrella." {
		t.Fatalf("%+v %v", res, err)
	}
	reqs := fake.Requests()
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.Role != "tool" || m.Text() != `{"forecast":"rain"}` {
		t.Errorf("the model got %+v, want the service's answer as the tool result", m)
	}
}
