package llm

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/effectors/effectors/retry"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvBaseURL    = "EA_LLM_BASE_URL"
	EnvModel      = "EA_LLM_MODEL"
	EnvAPIKey     = "EA_LLM_API_KEY"
	EnvEmbedModel = "EA_LLM_EMBED_MODEL"
)

// Retry is the retry policy for transient failures (429, 5xx, transport):
// [retry.Policy], the one policy type of every package. Zero fields take
// defaults: Attempts 3 (1 turns retries off), Backoff 250ms, Multiplier 2
// (the wait doubles after each retry), MaxBackoff 8s, no Jitter. RetryOn,
// when set, narrows which transient failures are retried; a failure that
// is not transient is never retried.
type Retry = retry.Policy

// defaultRetry is the default of Config.Retry's zero fields.
var defaultRetry = retry.Policy{Attempts: 3, Backoff: 250 * time.Millisecond, Multiplier: 2, MaxBackoff: 8 * time.Second}

// Config configures a Provider.
type Config struct {
	// BaseURL of the OpenAI-compatible API, e.g. https://api.openai.com/v1,
	// http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM).
	// Required.
	BaseURL string
	// Model for chat completions. Required.
	Model string
	// APIKey sent as a bearer token; empty for servers that need none.
	APIKey string
	// EmbedModel for embeddings; default Model.
	EmbedModel string
	// Retry policy; zero fields take defaults.
	Retry Retry
	// HTTPClient to use; default a client without timeout (contexts bound calls).
	HTTPClient *http.Client
}

// ConfigFromEnv reads EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY and
// EA_LLM_EMBED_MODEL. It does not validate: New does.
func ConfigFromEnv() Config {
	return Config{
		BaseURL:    os.Getenv(EnvBaseURL),
		Model:      os.Getenv(EnvModel),
		APIKey:     os.Getenv(EnvAPIKey),
		EmbedModel: os.Getenv(EnvEmbedModel),
	}
}

// Validate checks the configuration and fills in defaults.
func (c *Config) Validate() error {
	if c.BaseURL == "" {
		return fmt.Errorf("%w: BaseURL is empty (set %s, e.g. https://api.openai.com/v1)", ErrConfig, EnvBaseURL)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: BaseURL %q must be an http(s) URL", ErrConfig, c.BaseURL)
	}
	if c.Model == "" {
		return fmt.Errorf("%w: Model is empty (set %s)", ErrConfig, EnvModel)
	}
	if c.EmbedModel == "" {
		c.EmbedModel = c.Model
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: Retry: %w", ErrConfig, err)
	}
	c.Retry = c.Retry.Or(defaultRetry)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return nil
}
