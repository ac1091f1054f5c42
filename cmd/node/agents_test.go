//go:build unix

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/examples/threads"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// The API key the tests give the binaries in EA_LLM_API_KEY: the fake
// server sees it as the bearer token, and no output shows it.
const testKey = "sk-test-k3y-777"

// weatherService serves the seeds' weather service as a NATS micro service
// on nc: weather.forecast answers {"city","forecast"} for {"city"}.
func weatherService(t *testing.T, srv *bustest.Server) {
	t.Helper()
	nc := srv.Connect(t).NATS()
	svc, err := micro.AddService(nc, micro.Config{Name: "weather", Version: "1.0.0",
		Endpoint: &micro.EndpointConfig{Subject: "weather.forecast", Handler: micro.HandlerFunc(func(req micro.Request) {
			var in struct {
				City string `json:"city"`
			}
			if err := json.Unmarshal(req.Data(), &in); err != nil || in.City == "" {
				_ = req.Error("400", "want {\"city\"}", nil)
				return
			}
			_ = req.RespondJSON(map[string]string{"city": in.City, "forecast": "sunny, 21°C"})
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
}

// clockService is an HTTP service answering the local time for a POSTed
// {"city"}, when the request carries X-Key k1.
func clockService(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			City string `json:"city"`
		}
		if r.Header.Get("X-Key") != "k1" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil || in.City == "" {
			http.Error(w, "want a POST of {\"city\"}", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("14:05 in " + in.City))
	}))
	t.Cleanup(s.Close)
	return s.URL + "/time"
}

// toolsFile writes a --tools file: weather over NATS, clock over HTTP with
// its key from the environment.
func toolsFile(t *testing.T, clockURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tools.json")
	doc := `{"tools": [
  {"name": "weather", "description": "the weather forecast for a city",
   "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
   "nats": {"subject": "weather.forecast"}, "timeout": "10s"},
  {"name": "clock", "description": "the local time in a city",
   "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
   "http": {"url": "` + clockURL + `", "headers": {"X-Key": "${CLOCK_KEY}"}}}
]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// toolResults returns the contents of the tool messages of req.
func toolResults(req llmtest.Request) map[string]string {
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Text()
		}
	}
	return out
}

// TestAgentKinds runs ea-node with a model (the fake OpenAI-compatible
// server, its key from EA_LLM_API_KEY) and --tools naming a NATS micro
// service and an HTTP endpoint of the user's own: the writer streams the
// model's answer as a task, and the assistant's model calls both services
// as tools and answers from their results.
func TestAgentKinds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	fake := llmtest.NewServer(t)
	writerText := []string{"Queues ", "hold ", "the ", "words ", "until ", "a ", "reader ", "comes."}
	fake.Respond(func(req llmtest.Request) llmtest.Reply {
		switch {
		case len(req.Tools) > 0 && len(toolResults(req)) == 0:
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{
				{ID: "call_w", Name: "weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_c", Name: "clock", Arguments: `{"city":"Paris"}`},
			}}
		case len(req.Tools) > 0:
			res := toolResults(req)
			return llmtest.Reply{Chunks: []string{"Paris: ", res["call_w"], "; ", res["call_c"]}}
		case req.System() == writerPrompt:
			return llmtest.Reply{Chunks: writerText}
		}
		return llmtest.Reply{Text: "unexpected request"}
	})
	srv := bustest.NewServer(t)
	weatherService(t, srv)
	tools := toolsFile(t, clockService(t))

	metrics := proctest.FreeAddr(t)
	p := startProcess(t, "node", metrics, binary, []string{"EA_LLM_API_KEY=" + testKey, "CLOCK_KEY=k1", "EA_LLM_MODEL=fake-model"},
		"--nats", srv.URL, "--metrics", metrics,
		"--llm-base-url", fake.URL, "--tools", tools)
	p.waitReady(t, 60*time.Second)
	p.WaitOutput(t, 10*time.Second, "is ready")
	for _, want := range []string{"model    fake-model at " + fake.URL, "bin/ea send writer/w1", "bin/ea send assistant/a1"} {
		if !strings.Contains(p.Stdout.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, p.Stdout)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := actor.NewClient(ctx, srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	collect := func(ref records.Ref, input string) task.Result {
		t.Helper()
		if _, err := client.Create(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
		res, err := task.Collect(ctx, task.Remote{Client: client, Target: ref}, input, task.Timeout(time.Minute))
		if err != nil {
			t.Fatalf("%s: %v (result %+v)", ref, err, res)
		}
		return res
	}

	res := collect(records.Ref{Kind: WriterKind, ID: "w1"}, "a haiku about queues")
	if want := strings.Join(writerText, ""); res.Text != want {
		t.Errorf("writer streamed %q, want %q", res.Text, want)
	}
	if res.Usage.Output == 0 {
		t.Errorf("writer usage %+v: want the output tokens the fake counted", res.Usage)
	}

	res = collect(records.Ref{Kind: AssistantKind, ID: "a1"}, "What is the weather in Paris, and the time?")
	if want := `Paris: {"city":"Paris","forecast":"sunny, 21°C"}; 14:05 in Paris`; res.Text != want {
		t.Errorf("assistant answered %q, want %q", res.Text, want)
	}
	results := map[string]string{}
	for _, e := range res.Events {
		if e.Type != core.EventToolResult {
			continue
		}
		var te core.ToolEvent
		if err := json.Unmarshal(e.Data, &te); err != nil {
			t.Fatal(err)
		}
		results[te.Call.Name] = te.Result
	}
	if !strings.Contains(results["weather"], "sunny, 21°C") || results["clock"] != "14:05 in Paris" {
		t.Errorf("tool.result events %v: want the weather service's and the clock's answers", results)
	}

	// Tokens are counted per kind on the node's /metrics.
	if _, body := proctest.Get("http://" + metrics + "/metrics"); !strings.Contains(body, `ea_llm_tokens_total{direction="output",kind="writer"}`) ||
		!strings.Contains(body, `ea_llm_tokens_total{direction="input",kind="assistant"}`) {
		t.Errorf("/metrics lacks the writer's and the assistant's tokens:\n%s", body)
	}
	for _, req := range fake.Requests() {
		if req.Authorization != "Bearer "+testKey || req.Model != "fake-model" {
			t.Errorf("a request with Authorization %q and model %q: want the key of EA_LLM_API_KEY and the model of EA_LLM_MODEL", req.Authorization, req.Model)
			break
		}
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	if out := p.Stdout.String() + p.Stderr.String(); strings.Contains(out, testKey) {
		t.Errorf("the output shows the API key:\n%s", out)
	}
}

// TestNoModelNoAgents: without a model ea-node hosts its other kinds and
// says how to turn the agent kinds on.
func TestNoModelNoAgents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	srv := bustest.NewServer(t)
	metrics := proctest.FreeAddr(t)
	p := startNode(t, "node", metrics, "--nats", srv.URL, "--metrics", metrics)
	p.waitReady(t, 60*time.Second)
	p.WaitOutput(t, 10*time.Second, "is ready")
	if out := p.Stdout.String(); !strings.Contains(out, "kinds controller, counter, task-a, task-b,") || strings.Contains(out, "writer") {
		t.Errorf("banner without a model:\n%s", out)
	}
	if !strings.Contains(p.Stderr.String(), "agent kinds are off (set --llm-base-url and --llm-model, or EA_LLM_BASE_URL and EA_LLM_MODEL)") {
		t.Errorf("no log line saying how to turn the agent kinds on:\n%s", p.Stderr)
	}
	_ = p.Signal(syscall.SIGTERM)
	p.Wait(t, 30*time.Second)
}

// TestBadModelSettings: malformed model settings stop ea-node at once with
// exit status 2 and a message naming the setting, never the key.
func TestBadModelSettings(t *testing.T) {
	t.Parallel()
	badTools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(badTools, []byte(`{"tools":[{"name":"weather","description":"x","nats":{"subject":"weather.>"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--llm-base-url", "localhost:11434"}, []string{"EA_LLM_MODEL=m"},
			`--llm-base-url "localhost:11434": want an http(s) URL of an OpenAI-compatible API`},
		{nil, []string{"EA_LLM_BASE_URL=http://127.0.0.1:1/v1"}, "needs a model: set --llm-model (EA_LLM_MODEL)"},
		{nil, []string{"EA_LLM_MODEL=m", "EA_LLM_API_KEY=" + testKey}, "--llm-model and EA_LLM_API_KEY set without --llm-base-url"},
		{[]string{"--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--llm-api-key-file", "/nonexistent/key"}, []string{"EA_LLM_API_KEY=" + testKey},
			"EA_LLM_API_KEY and --llm-api-key-file are both set"},
		{[]string{"--llm-base-url", "scripted:"}, []string{"EA_LLM_MODEL=gpt-4o-mini", "EA_LLM_API_KEY=" + testKey},
			"--llm-model and EA_LLM_API_KEY set with --llm-base-url scripted:, the built-in scripted model"},
		{[]string{"--llm-base-url", "http://127.0.0.1:1/v1", "--llm-model", "m", "--tools", badTools}, nil,
			`tool "weather": nats subject "weather.>": want dot-separated tokens without wildcards`},
	} {
		p := startProcess(t, "node", "", binary, tc.env, append(tc.args, "--metrics", "off")...)
		code := p.Wait(t, 30*time.Second)
		out := p.Stdout.String() + p.Stderr.String()
		if code != 2 || !strings.Contains(out, tc.want) || strings.Contains(out, testKey) {
			t.Errorf("ea-node %q %q: exit %d, output:\n%s\nwant exit 2 and %q", tc.env, tc.args, code, out, tc.want)
		}
	}
}

// TestModelDrivenOrchestration runs ea-node and ea-supervisor, both given
// the fake model, and the orchestration "research" through them: the model
// chooses a follow-up question, then to finish; the researcher threads
// answer on the node.
func TestModelDrivenOrchestration(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	supBinary := filepath.Join(t.TempDir(), "ea-supervisor")
	if err := proctest.Build(supBinary, "../supervisor"); err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewServer(t)
	var decisions atomic.Int32
	fake.Respond(func(req llmtest.Request) llmtest.Reply {
		switch req.System() {
		case threads.DecidePrompt:
			if decisions.Add(1) == 1 {
				return llmtest.Reply{Text: `{"next":"followup","message":"and at sunset?","reason":"half the story"}`}
			}
			return llmtest.Reply{Text: `{"next":"finish","message":"Rayleigh scattering; red at sunset.","reason":"enough"}`}
		case threads.WorkerPrompt:
			return llmtest.Reply{Chunks: []string{"answer to: ", req.LastUser()}}
		}
		return llmtest.Reply{Text: "unexpected request"}
	})
	srv := bustest.NewServer(t)
	env := []string{"EA_LLM_BASE_URL=" + fake.URL, "EA_LLM_MODEL=fake-model", "EA_LLM_API_KEY=" + testKey}
	nodeMetrics, supMetrics := proctest.FreeAddr(t), proctest.FreeAddr(t)
	n := startProcess(t, "node", nodeMetrics, binary, env, "--nats", srv.URL, "--metrics", nodeMetrics)
	s := startProcess(t, "supervisor", supMetrics, supBinary, env, "--nats", srv.URL, "--metrics", supMetrics, "--gateway", "off")
	n.waitReady(t, 60*time.Second)
	s.waitReady(t, 60*time.Second)
	s.WaitOutput(t, 10*time.Second, "bin/ea orch start research")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := supervisor.NewClient(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Start(ctx, threads.Name, map[string]string{"goal": "why is the sky blue?"})
	if err != nil {
		t.Fatal(err)
	}
	var o supervisor.Orchestration
	eventually(t, 90*time.Second, "the research orchestration to end", func() bool {
		o, err = c.Status(ctx, id)
		return err == nil && o.Status.Final()
	})
	var st threads.State
	if err := json.Unmarshal(o.Results, &st); err != nil {
		t.Fatal(err)
	}
	if o.Status != supervisor.StatusCompleted || st.Final != "Rayleigh scattering; red at sunset." {
		t.Fatalf("status %s %s, final %q", o.Status, o.Error, st.Final)
	}
	if len(st.Decisions) != 2 || st.Decisions[0].Next != threads.StepFollowup || st.Decisions[1].Next != threads.StepFinish || st.Decisions[0].Fallback {
		t.Errorf("decisions %+v: want the model's followup, then finish", st.Decisions)
	}
	if len(st.Answers) != 2 || st.Answers[0].Text != "answer to: why is the sky blue?" || st.Answers[1].Text != "answer to: and at sunset?" {
		t.Errorf("answers %+v: want the researcher's two turns", st.Answers)
	}
	for _, p := range []*process{n, s} {
		_ = p.Signal(syscall.SIGTERM)
		p.Wait(t, 30*time.Second)
		if out := p.Stdout.String() + p.Stderr.String(); strings.Contains(out, testKey) {
			t.Errorf("%s shows the API key:\n%s", p.Name, out)
		}
	}
}
