package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type llmConfig struct{ LLM LLM }

func parseLLM(args []string, env map[string]string) (LLM, error) {
	var c llmConfig
	if _, err := Parse("prog", LLMSettings(func(c *llmConfig) *LLM { return &c.LLM }), args, envOf(env), &c); err != nil {
		return LLM{}, err
	}
	err := c.LLM.Load(envOf(env))
	return c.LLM, err
}

func TestLLM(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"EA_LLM_BASE_URL": "http://localhost:11434/v1", "EA_LLM_MODEL": "llama3.2"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		describe string
		key      string
		err      string
	}{
		{name: "none", describe: "none"},
		{name: "env", env: with(map[string]string{"EA_LLM_API_KEY": "sk-env"}), describe: "llama3.2 at http://localhost:11434/v1", key: "sk-env"},
		{name: "flags win", args: []string{"--llm-model", "qwen", "--llm-api-key-file", keyFile}, env: base, describe: "qwen at http://localhost:11434/v1", key: "sk-from-file"},
		{name: "embed model", args: []string{"--llm-embed-model", "nomic-embed-text"}, env: base, describe: "llama3.2 at http://localhost:11434/v1"},
		{name: "bad url", args: []string{"--llm-base-url", "localhost:11434"}, err: `--llm-base-url "localhost:11434": want an http(s) URL`},
		{name: "bad url from env", env: map[string]string{"EA_LLM_BASE_URL": "ftp://x"}, err: `--llm-base-url "ftp://x" (from EA_LLM_BASE_URL): want an http(s) URL`},
		{name: "credentials in url", args: []string{"--llm-base-url", "https://u:pw@api.example.com/v1"}, err: "want the URL without credentials"},
		{name: "model with spaces", args: []string{"--llm-model", "gpt 4"}, env: base, err: "want a model name"},
		{name: "no model", env: map[string]string{"EA_LLM_BASE_URL": "http://localhost:11434/v1"}, err: "needs a model: set --llm-model (EA_LLM_MODEL)"},
		{name: "model without url", env: map[string]string{"EA_LLM_MODEL": "m"}, err: "--llm-model set without --llm-base-url"},
		{name: "key without url", env: map[string]string{"EA_LLM_API_KEY": "sk-x"}, err: "EA_LLM_API_KEY set without --llm-base-url"},
		{name: "key two ways", args: []string{"--llm-api-key-file", keyFile}, env: with(map[string]string{"EA_LLM_API_KEY": "sk-x"}), err: "EA_LLM_API_KEY and --llm-api-key-file are both set"},
		{name: "empty key file", args: []string{"--llm-api-key-file", empty}, env: base, err: "the file is empty"},
		{name: "key with a line break", env: with(map[string]string{"EA_LLM_API_KEY": "sk-a\nsk-b"}), err: "holds a line break"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := parseLLM(tc.args, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "sk-") {
					t.Fatalf("err %v, want one with %q and no key", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Describe() != tc.describe || l.Key() != tc.key || l.Configured() != (tc.describe != "none") {
				t.Errorf("describe %q key %q configured %v, want %q %q", l.Describe(), l.Key(), l.Configured(), tc.describe, tc.key)
			}
		})
	}
}
