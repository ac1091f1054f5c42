package supervisord

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/supervisor"
)

// llmSettings are the supervisor's settings of the model its model-driven
// orchestrations ask (the same --llm-* settings and EA_LLM_* variables as
// a node's).
func llmSettings() []*cli.Setting[config] {
	return cli.LLMSettings(func(c *config) *cli.LLM { return &c.LLM })
}

// loadLLM reads the API key and checks the model settings, so that a
// malformed one stops the supervisor at once with an error naming it.
func (c *config) loadLLM(getenv func(string) string) error {
	if err := c.LLM.Load(getenv); err != nil {
		return err
	}
	return nil
}

// agents builds the model-driven orchestrations of cmd: nil when the
// command has none or no model is configured (then it logs which setting
// turns them on).
func (cmd Command) agents(cfg config, log *slog.Logger, reg prometheus.Registerer) ([]supervisor.Definition, error) {
	if cmd.Agents == nil {
		return nil, nil
	}
	if !cfg.LLM.Configured() {
		log.Info("no model is configured: model-driven orchestrations are off (set --llm-base-url and --llm-model, or EA_LLM_BASE_URL and EA_LLM_MODEL)")
		return nil, nil
	}
	p, metrics, err := cfg.LLM.Provider(reg)
	if err != nil {
		return nil, err
	}
	if cfg.LLM.Scripted() {
		log.Warn(cli.ScriptedWarning, "llm", cfg.LLM.Describe())
	}
	log.Info("model-driven orchestrations use a model", "llm", cfg.LLM.Describe())
	defs, err := cmd.Agents(&core.Services{LLM: p, Metrics: metrics})
	if err != nil {
		return nil, fmt.Errorf("model-driven orchestrations: %w", err)
	}
	return defs, nil
}
