package graph_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/graph"
)

// TestStreamMessagesFromLLM: a node streams a model's answer (core/llm
// against the fake OpenAI-compatible server); StreamMessages yields the
// tokens as they arrive, with the node and task, before the step's values.
func TestStreamMessagesFromLLM(t *testing.T) {
	srv := llmtest.NewServer(t)
	p, err := llm.New(llm.Config{BaseURL: srv.URL, Model: "fake-model", APIKey: "k",
		Retry: llm.Retry{Attempts: 1, Backoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(llmtest.Reply{Chunks: []string{"Otters ", "hold ", "hands."}})

	b, f := newBuilder()
	b.AddNode("chat", func(ctx context.Context, s st) (graph.Update[st], error) {
		text, err := graph.StreamText(ctx, core.StreamText(ctx, p, core.Prompt("", "tell me about "+s.Item)))
		if err != nil {
			return graph.Update[st]{}, err
		}
		return graph.Updates(f.name.Set(text)), nil
	})
	b.AddEdge(graph.START, "chat")
	g := mustCompile(t, b)
	var tokens []string
	var final string
	for ev, err := range g.Stream(ctxT(t), "", graph.Update[st]{}, graph.WithStreamModes(graph.StreamMessages, graph.StreamValues)) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Mode {
		case graph.StreamMessages:
			if ev.Node != "chat" || ev.Task == "" || final != "" {
				t.Fatalf("message event %+v (after the values: %q)", ev, final)
			}
			tokens = append(tokens, ev.Data.(string))
		case graph.StreamValues:
			final = ev.State.Name
		}
	}
	if strings.Join(tokens, "|") != "Otters |hold |hands." || final != "Otters hold hands." {
		t.Fatalf("tokens %q, final %q", tokens, final)
	}
}
