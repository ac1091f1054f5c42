// Package llm is the OpenAI-compatible LLM provider of the agent services: it
// implements core.LLM over the chat-completions and embeddings APIs with the
// official client library (github.com/openai/openai-go), so it works with
// OpenAI, vLLM, llama.cpp server, Ollama and anything else that speaks them.
//
// # Configuration
//
// A [Config] names the base URL, model, API key and embedding model;
// [ConfigFromEnv] reads them from EA_LLM_BASE_URL, EA_LLM_MODEL,
// EA_LLM_API_KEY and EA_LLM_EMBED_MODEL.
//
// # Failures and retries
//
// Every error is a *core.Error: CodeProvider for HTTP and transport failures
// (cause a *StatusError for an HTTP status), CodeCancelled or CodeTimeout when
// the context ends. Transient failures (429, 5xx, transport) are retried with
// exponential backoff ([Retry]); the client library's own retries are off so
// that one policy rules.
//
// # Streaming
//
// [Provider.Stream] yields text deltas as a Go iterator, then a final
// core.Delta whose Final is the whole response: the text, the tool calls
// assembled from their streamed pieces, the finish reason and the token
// usage (it asks for stream_options.include_usage; a server that ignores it
// reports zero usage). Breaking the loop or ending the context closes the
// HTTP response at once.
//
// # Usage
//
// Every response carries core.Usage (prompt and completion tokens as the
// provider reports them); requests made through a core.Scope are counted in
// ea_llm_tokens_total{kind,direction}.
package llm
