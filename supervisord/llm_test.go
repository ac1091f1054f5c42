package supervisord

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/supervisor"
)

func TestLLMSettings(t *testing.T) {
	cfg, err := parseConfig("ea-supervisor", []string{"--llm-model", "qwen"},
		envOf(map[string]string{"EA_LLM_BASE_URL": "http://localhost:8000/v1", "EA_LLM_MODEL": "llama3.2", "EA_LLM_API_KEY": "sk-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Describe() != "qwen at http://localhost:8000/v1" || cfg.LLM.Key() != "sk-1" {
		t.Errorf("llm %s key %q", cfg.LLM.Describe(), cfg.LLM.Key())
	}
	if _, err := parseConfig("ea-supervisor", nil, envOf(map[string]string{"EA_LLM_BASE_URL": "http://localhost:8000/v1"})); err == nil ||
		!strings.Contains(err.Error(), "needs a model") {
		t.Errorf("a base URL without a model: %v", err)
	}
	if !strings.Contains(usage("ea-supervisor", ""), "--llm-base-url URL") {
		t.Error("the usage lacks --llm-base-url")
	}
}

// The orchestrations of Agents are built only with a model; a command with
// nothing else to run says so.
func TestAgentsNeedAModel(t *testing.T) {
	called := 0
	cmd := Command{Name: "sup", Agents: func(svc *core.Services) ([]supervisor.Definition, error) {
		called++
		if svc.LLM == nil || svc.Metrics == nil {
			t.Error("services without an LLM or metrics")
		}
		return nil, nil
	}}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if defs, err := cmd.agents(config{}, log, prometheus.NewRegistry()); err != nil || defs != nil || called != 0 {
		t.Fatalf("without a model: %v %v, called %d", defs, err, called)
	}
	if !strings.Contains(logs.String(), "model-driven orchestrations are off (set --llm-base-url") {
		t.Errorf("log %q", logs.String())
	}
	cfg, err := parseConfig("sup", nil, envOf(map[string]string{"EA_LLM_BASE_URL": "http://localhost:8000/v1", "EA_LLM_MODEL": "m"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.agents(cfg, log, prometheus.NewRegistry()); err != nil || called != 1 {
		t.Fatalf("with a model: %v, called %d", err, called)
	}
	var out, errOut bytes.Buffer
	if err := cmd.Run(context.Background(), nil, envOf(nil), &out, &errOut); !errors.Is(err, ErrNoDefinitions) {
		t.Errorf("no definitions and no model: %v, want ErrNoDefinitions", err)
	}
}
