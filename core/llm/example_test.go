package llm_test

import (
	"fmt"

	"github.com/effectors/effectors/core/llm"
)

func ExampleNew() {
	// Usually llm.ConfigFromEnv(): EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY.
	p, err := llm.New(llm.Config{BaseURL: "http://localhost:11434/v1", Model: "llama3.2"})
	fmt.Println(p.Model(), err)
	_, err = llm.New(llm.Config{Model: "llama3.2"})
	fmt.Println(err)
	// Output:
	// llama3.2 <nil>
	// llm: bad configuration: BaseURL is empty (set EA_LLM_BASE_URL, e.g. https://api.openai.com/v1)
}
