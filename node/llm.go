package node

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/internal/cli"
)

// Agents is what [Command].Agents builds a node's agent kinds with, once
// the node knows its model: the services (an LLM of --llm-base-url, the
// --tools services of the user's own as tools, token metrics), the
// connection (for task.ApproveByRecords, say) and the logger.
type Agents struct {
	// Services holds the LLM, the tools of --tools (an empty registry
	// without it) and the ea_llm_tokens_total metrics. Share it between the
	// kinds (core.Wrap).
	Services *core.Services
	// Tools are the names of the tools of --tools, sorted; empty without.
	Tools []string
	Conn  *bus.Conn
	Log   *slog.Logger
}

// llmSettings are the node's settings of the model and of the user's
// services as tools.
func llmSettings() []*cli.Setting[config] {
	out := cli.LLMSettings(func(c *config) *cli.LLM { return &c.LLM })
	return append(out, &cli.Setting[config]{Name: "tools", Arg: "FILE", DefText: "none",
		Usage: `JSON file describing services of your own (NATS request-reply subjects, HTTP endpoints) that agent kinds may call as tools: {"tools": [{"name", "description", "schema", "nats": {"subject"} or "http": {"url"}}]} (docs/agents.md)`,
		Check: func(c *config, v string) string { c.ToolsFile = strings.TrimSpace(v); return "" }})
}

// loadLLM reads the API key and the --tools file, so that a malformed
// setting stops the node at once with an error naming it.
func (c *config) loadLLM(getenv func(string) string) error {
	if err := c.LLM.Load(getenv); err != nil {
		return err
	}
	if c.ToolsFile == "" {
		return nil
	}
	if !c.LLM.Configured() {
		return cli.Usagef("--tools %s is set without --llm-base-url (EA_LLM_BASE_URL): tools are called by a model, set one", c.ToolsFile)
	}
	tf, err := core.LoadToolFile(c.ToolsFile, getenv)
	if err != nil {
		return cli.Usagef("--tools %s: %v", c.ToolsFile, strings.TrimPrefix(err.Error(), "tools.load: invalid: "))
	}
	for _, t := range tf.Tools {
		if t.NATS != nil && strings.HasPrefix(t.NATS.Subject, c.Prefix+".") {
			return cli.Usagef("--tools %s: tool %q: subject %s is under the runtime's prefix %q (mailboxes, control, the store): a model's arguments must not reach them; serve your service on a subject of its own", c.ToolsFile, t.Name, t.NATS.Subject, c.Prefix)
		}
	}
	c.Tools = tf
	return nil
}

// agents builds the agent kinds of cmd once the node is connected: nil when
// the command has none or no model is configured (then it logs which
// setting turns them on).
func (cmd Command) agents(cfg config, conn *bus.Conn, log *slog.Logger, reg prometheus.Registerer) ([]actor.Definition, error) {
	if cmd.Agents == nil {
		return nil, nil
	}
	if !cfg.LLM.Configured() {
		log.Info("no model is configured: agent kinds are off (set --llm-base-url and --llm-model, or EA_LLM_BASE_URL and EA_LLM_MODEL)")
		return nil, nil
	}
	p, metrics, err := cfg.LLM.Provider(reg)
	if err != nil {
		return nil, err
	}
	tools := core.NewTools()
	if len(cfg.Tools.Tools) > 0 {
		built, err := cfg.Tools.Build(conn.NATS(), &http.Client{})
		if err != nil {
			return nil, fmt.Errorf("--tools %s: %w", cfg.ToolsFile, err)
		}
		if err := tools.Register(built...); err != nil {
			return nil, fmt.Errorf("--tools %s: %w", cfg.ToolsFile, err)
		}
	}
	if cfg.LLM.Scripted() {
		log.Warn(cli.ScriptedWarning, "llm", cfg.LLM.Describe())
	}
	log.Info("agent kinds use a model", "llm", cfg.LLM.Describe(), "tools", strings.Join(tools.Names(), ","))
	kinds, err := cmd.Agents(Agents{
		Services: &core.Services{LLM: p, Tools: tools, Metrics: metrics},
		Tools:    tools.Names(),
		Conn:     conn,
		Log:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("agent kinds: %w", err)
	}
	return kinds, nil
}
