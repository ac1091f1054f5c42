package llm

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvBaseURL    = "EA_LLM_BASE_URL"
	EnvModel      = "EA_LLM_MODEL"
	EnvAPIKey     = "EA_LLM_API_KEY"
	EnvEmbedModel = "EA_LLM_EMBED_MODEL"
)

// Retry is the retry policy for transient failures (429, 5xx, transport).
type Retry struct {
	// Attempts is the number of tries, the first included. Default 3; 1 turns
	// retries off.
	Attempts int
	// Backoff is the wait before the first retry. Default 250ms.
	Backoff time.Duration
	// MaxBackoff caps the wait, which doubles after each retry. Default 8s.
	MaxBackoff time.Duration
}

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
	if c.Retry.Attempts < 0 || c.Retry.Backoff < 0 || c.Retry.MaxBackoff < 0 {
		return fmt.Errorf("%w: Retry fields must not be negative", ErrConfig)
	}
	if c.Retry.Attempts == 0 {
		c.Retry.Attempts = 3
	}
	if c.Retry.Backoff == 0 {
		c.Retry.Backoff = 250 * time.Millisecond
	}
	if c.Retry.MaxBackoff == 0 {
		c.Retry.MaxBackoff = 8 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return nil
}
