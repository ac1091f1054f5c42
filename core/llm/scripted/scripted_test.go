package scripted_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func model(t *testing.T) core.LLM {
	t.Helper()
	p, err := scripted.New()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestText: an answer names the scripted model, quotes the question, counts
// the conversation's user messages, and is the same every time; streamed,
// it comes in several chunks that add up to it, with its usage.
func TestText(t *testing.T) {
	m := model(t)
	ctx := t.Context()
	req := core.Prompt("You are a writer.", "write a haiku about queues")
	first, err := m.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Text, scripted.Tag+" ") || !strings.Contains(first.Text, `"write a haiku about queues"`) ||
		!strings.Contains(first.Text, "message 1 of this conversation") || !strings.Contains(first.Text, "not a language model") {
		t.Errorf("answer %q", first.Text)
	}
	again, err := m.Generate(ctx, req)
	if err != nil || again.Text != first.Text {
		t.Errorf("asked again: %q, %v; want %q", again.Text, err, first.Text)
	}

	var chunks []string
	var final *core.Response
	for d, err := range m.Stream(ctx, req) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Final != nil {
			final = d.Final
			continue
		}
		chunks = append(chunks, d.Text)
	}
	if len(chunks) < 5 || strings.Join(chunks, "") != first.Text {
		t.Errorf("streamed %d chunks %q; want several adding up to %q", len(chunks), chunks, first.Text)
	}
	if final == nil || final.Text != first.Text || final.Usage.Input == 0 || final.Usage.Output == 0 {
		t.Errorf("final delta %+v: want the whole answer and its usage", final)
	}

	// A thread's memory shows: the second user message is counted.
	req.Messages = append(req.Messages, first.Message(), core.Message{Role: core.RoleUser, Content: "and another"})
	second, err := m.Generate(ctx, req)
	if err != nil || !strings.Contains(second.Text, `"and another" (message 2 of this conversation)`) {
		t.Errorf("second turn: %q, %v", second.Text, err)
	}
}

// TestStreamBreak: breaking a stream ends the in-process request (goleak
// checks that nothing is left running).
func TestStreamBreak(t *testing.T) {
	m := model(t)
	for _, err := range m.Stream(t.Context(), core.Prompt("", "one two three four five six")) {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Generate(ctx, core.Prompt("", "x")); err == nil {
		t.Error("a cancelled request answered")
	}
}

type city struct {
	City string `json:"city"`
	Days int    `json:"days,omitempty"`
}

// TestTools: offered tools, the model calls each of them with arguments
// that fit their schemas, then answers with what they returned.
func TestTools(t *testing.T) {
	m := model(t)
	tools := core.NewTools()
	var called []string
	for _, name := range []string{"weather", "clock"} {
		tool, err := core.NewTool(name, "the "+name+" in a city", func(_ context.Context, in city) (string, error) {
			called = append(called, name+"("+in.City+")")
			return name + " of " + in.City, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := tools.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	res, msgs, err := core.RunTools(t.Context(), m, tools, core.Prompt("", "Paris"), []string{"weather", "clock"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(called, []string{"weather(Paris)", "clock(Paris)"}) {
		t.Errorf("tools called: %q", called)
	}
	if !strings.HasPrefix(res.Text, scripted.Tag) || !strings.Contains(res.Text, "weather: weather of Paris; clock: clock of Paris") {
		t.Errorf("answer %q", res.Text)
	}
	if len(msgs) != 5 { // user, the calls, two results, the answer
		t.Errorf("conversation of %d messages: %+v", len(msgs), msgs)
	}
}

type choice struct {
	Next    string   `json:"next"`
	Message string   `json:"message"`
	Score   float64  `json:"score"`
	Done    bool     `json:"done"`
	Steps   []string `json:"steps"`
	Inner   struct {
		Note string `json:"note"`
	} `json:"inner"`
}

// TestObject: asked for structured output, the model answers JSON that
// fits the schema, its strings tagged.
func TestObject(t *testing.T) {
	m := model(t)
	v, err := core.GenerateObject[choice](t.Context(), m, core.Prompt("Decide.", "what next?"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Next != scripted.Tag+" next" || v.Message != scripted.Tag+" message" || v.Inner.Note != scripted.Tag+" note" {
		t.Errorf("object %+v", v)
	}
	for d, err := range core.StreamObject[choice](t.Context(), m, core.Prompt("Decide.", "what next?")) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Final && d.Partial.Next != v.Next {
			t.Errorf("streamed object %+v, want %+v", d.Partial, v)
		}
	}
}

// TestEmbed: embeddings are deterministic and texts sharing words are
// closer than texts that share none.
func TestEmbed(t *testing.T) {
	m := model(t)
	vs, err := m.Embed(t.Context(), []string{"the sky is blue", "the sky is blue", "why is the sky blue", "queues hold records"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 4 || len(vs[0]) != 64 || !slices.Equal(vs[0], vs[1]) {
		t.Fatalf("embeddings %v", vs)
	}
	dot := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	if dot(vs[0], vs[2]) <= dot(vs[0], vs[3]) {
		t.Errorf("similar texts at %f, unrelated at %f", dot(vs[0], vs[2]), dot(vs[0], vs[3]))
	}
}
