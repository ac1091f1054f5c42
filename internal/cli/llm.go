package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llm/scripted"
	"github.com/prometheus/client_golang/prometheus"
)

// LLMKeyEnv is the environment variable of the LLM provider's API key. It
// has no flag on purpose, as for every secret (see [Auth]): the key comes
// from it or from --llm-api-key-file.
const LLMKeyEnv = "EA_LLM_API_KEY"

// LLM is the model a binary's agent kinds and orchestrations ask: the
// settings of [LLMSettings], any OpenAI-compatible API, or with BaseURL
// "scripted:" the built-in scripted model (core/llm/scripted). BaseURL empty
// means no model is configured. After [Parse], [LLM.Load] reads the key and
// checks that the settings go together.
type LLM struct {
	BaseURL    string // --llm-base-url (EA_LLM_BASE_URL)
	Model      string // --llm-model (EA_LLM_MODEL)
	EmbedModel string // --llm-embed-model (EA_LLM_EMBED_MODEL); empty: Model
	KeyFile    string // --llm-api-key-file (EA_LLM_API_KEY_FILE)

	key string // set by Load: from EA_LLM_API_KEY or KeyFile
}

// LLMSettings are the settings of [LLM], checked into the field of C that
// field returns: --llm-base-url, --llm-model, --llm-embed-model and
// --llm-api-key-file. Their variables are the EA_LLM_* ones every example
// reads (core/llm.ConfigFromEnv), so one environment serves both.
func LLMSettings[C any](field func(*C) *LLM) []*Setting[C] {
	return []*Setting[C]{
		{Name: "llm-base-url", Arg: "URL", DefText: "none: agent kinds and model-driven orchestrations are off",
			Usage: "base URL of an OpenAI-compatible API (OpenAI, Ollama, vLLM, llama.cpp…), e.g. http://localhost:11434/v1; " +
				scripted.BaseURL + " for the built-in scripted model (canned answers, to try the agents without a model; make run's default)",
			Check: func(c *C, v string) string {
				v = strings.TrimSpace(v)
				field(c).BaseURL = v
				if v == "" || v == scripted.BaseURL {
					return ""
				}
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return "want an http(s) URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1 or http://localhost:11434/v1 (or " + scripted.BaseURL + " for the built-in scripted model)"
				}
				if u.User != nil {
					return "want the URL without credentials: give the API key in " + LLMKeyEnv + " or --llm-api-key-file"
				}
				return ""
			}},
		{Name: "llm-model", Arg: "NAME", Usage: "chat model of --llm-base-url, e.g. gpt-4o-mini or llama3.2 (required with --llm-base-url)",
			Check: func(c *C, v string) string { return llmName(v, &field(c).Model) }},
		{Name: "llm-embed-model", Arg: "NAME", DefText: "--llm-model", Usage: "embeddings model of --llm-base-url",
			Check: func(c *C, v string) string { return llmName(v, &field(c).EmbedModel) }},
		{Name: "llm-api-key-file", Arg: "FILE", Usage: "file holding the API key of --llm-base-url (or set " + LLMKeyEnv + "; local servers need none)",
			Check: func(c *C, v string) string { field(c).KeyFile = strings.TrimSpace(v); return "" }},
	}
}

// llmName checks a model name: printable, no spaces, bounded.
func llmName(v string, dst *string) string {
	v = strings.TrimSpace(v)
	if len(v) > 256 || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "want a model name of at most 256 characters without spaces, e.g. gpt-4o-mini"
	}
	*dst = v
	return ""
}

// Load reads the API key from getenv (EA_LLM_API_KEY) or --llm-api-key-file
// and checks that the settings go together: a model with a base URL, no
// model or key without one, the key given one way. Its errors are
// *UsageError naming the flag or variable, never the key.
func (l *LLM) Load(getenv func(string) string) error {
	key := getenv(LLMKeyEnv)
	if l.BaseURL == "" {
		var set []string
		for _, s := range []struct{ name, v string }{{"--llm-model", l.Model}, {"--llm-embed-model", l.EmbedModel}, {"--llm-api-key-file", l.KeyFile}, {LLMKeyEnv, key}} {
			if s.v != "" {
				set = append(set, s.name)
			}
		}
		if len(set) > 0 {
			return Usagef("%s set without --llm-base-url (EA_LLM_BASE_URL): set the base URL of the OpenAI-compatible API too, e.g. http://localhost:11434/v1", strings.Join(set, " and "))
		}
		return nil
	}
	if l.Scripted() {
		var set []string
		for _, s := range []struct {
			name, v string
			isModel bool
		}{{"--llm-model", l.Model, true}, {"--llm-embed-model", l.EmbedModel, true}, {"--llm-api-key-file", l.KeyFile, false}, {LLMKeyEnv, key, false}} {
			if s.v != "" && (!s.isModel || s.v != scripted.Model) {
				set = append(set, s.name)
			}
		}
		if len(set) > 0 {
			return Usagef("%s set with --llm-base-url %s, the built-in scripted model, which has one model and needs no key: unset them, or set --llm-base-url (EA_LLM_BASE_URL) to your API's URL", strings.Join(set, " and "), scripted.BaseURL)
		}
		l.Model, l.EmbedModel = scripted.Model, scripted.Model
		return nil
	}
	if l.Model == "" {
		return Usagef("--llm-base-url %s needs a model: set --llm-model (EA_LLM_MODEL), e.g. gpt-4o-mini or llama3.2", l.BaseURL)
	}
	switch {
	case key != "" && l.KeyFile != "":
		return Usagef("%s and --llm-api-key-file are both set: give the API key one way", LLMKeyEnv)
	case l.KeyFile != "":
		k, err := readSecret(l.KeyFile)
		if err != nil {
			return Usagef("--llm-api-key-file %q: %v", l.KeyFile, err)
		}
		key = k
	}
	if strings.ContainsAny(key, "\r\n") {
		return Usagef("the API key (%s or --llm-api-key-file) holds a line break: want one line", LLMKeyEnv)
	}
	l.key = strings.TrimSpace(key)
	cfg := l.Config()
	if err := cfg.Validate(); err != nil {
		return Usagef("--llm-base-url %s: %v", l.BaseURL, err)
	}
	return nil
}

// Config is the provider configuration of the settings, with the key
// [LLM.Load] read.
func (l LLM) Config() llm.Config {
	return llm.Config{BaseURL: l.BaseURL, Model: l.Model, EmbedModel: l.EmbedModel, APIKey: l.key}
}

// Provider returns the model client of the settings and the LLM metrics
// (ea_llm_tokens_total and the rest), registered on reg: what a binary's
// agent kinds and orchestrations share through core.Services.
func (l LLM) Provider(reg prometheus.Registerer) (*llm.Provider, *core.Metrics, error) {
	newProvider := func() (*llm.Provider, error) { return llm.New(l.Config()) }
	if l.Scripted() {
		newProvider = scripted.New
	}
	p, err := newProvider()
	if err != nil {
		return nil, nil, fmt.Errorf("--llm-base-url: %w", err)
	}
	metrics, err := core.NewMetrics(reg)
	if err != nil {
		return nil, nil, fmt.Errorf("register LLM metrics: %w", err)
	}
	return p, metrics, nil
}

// Configured reports whether a model is configured (--llm-base-url).
func (l LLM) Configured() bool { return l.BaseURL != "" }

// Scripted reports whether the model is the built-in scripted one
// (--llm-base-url scripted:), which a binary must announce with a warning.
func (l LLM) Scripted() bool { return l.BaseURL == scripted.BaseURL }

// ScriptedWarning is the warning a binary logs at start when its model is
// the scripted one.
const ScriptedWarning = "the model is the built-in scripted one (--llm-base-url " + scripted.BaseURL + "): every answer is canned and starts with " +
	"\"" + scripted.Tag + "\", no language model is asked; set --llm-base-url and --llm-model (EA_LLM_BASE_URL, EA_LLM_MODEL) to an OpenAI-compatible API for real answers"

// Key is the API key [LLM.Load] read; empty for none.
func (l LLM) Key() string { return l.key }

// Describe says which model is configured, for a log line or a banner:
// "llama3.2 at http://localhost:11434/v1", "scripted (built in: canned
// answers, not a language model)", or "none". It never holds the key.
func (l LLM) Describe() string {
	if !l.Configured() {
		return "none"
	}
	if l.Scripted() {
		return scripted.Model + " (built in: canned answers, not a language model)"
	}
	return l.Model + " at " + l.BaseURL
}
