package scripted

import (
	"fmt"
	"net/http"

	"github.com/effectors/effectors/core/llm"
)

// BaseURL is the value of --llm-base-url (EA_LLM_BASE_URL) that selects the
// scripted model in ea-node and ea-supervisor (and every node.Main or
// supervisord.Main binary) instead of an OpenAI-compatible API.
const BaseURL = "scripted:"

// Model is the model name the scripted model reports, in the requests the
// client sends and in every response.
const Model = "scripted"

// embedDim is the dimension of the scripted model's embeddings.
const embedDim = 64

// New returns the scripted model as a provider: core/llm's client of the
// OpenAI API (the one every real model is asked through: retries, streaming,
// tool calls, token usage), its requests served in process by a [Handler]
// answering with [Script] and embedding with [HashEmbedding]. Nothing
// leaves the process and no key is needed.
func New() (*llm.Provider, error) {
	h := &Handler{
		Reply: Script,
		Embed: func(_ Request, texts []string) [][]float32 {
			embed := HashEmbedding(embedDim)
			out := make([][]float32, len(texts))
			for i, t := range texts {
				out[i] = embed(t)
			}
			return out
		},
	}
	p, err := llm.New(llm.Config{
		// A host that never resolves: the transport below answers every
		// request before any name is looked up.
		BaseURL:    "http://scripted.invalid/v1",
		Model:      Model,
		Retry:      llm.Retry{Attempts: 1},
		HTTPClient: &http.Client{Transport: Transport(h)},
	})
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	return p, nil
}
