package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestToolsSetting(t *testing.T) {
	dir := t.TempDir()
	file := func(name, subject string) string {
		p := filepath.Join(dir, name)
		doc := `{"tools": [{"name": "weather", "description": "the forecast", "nats": {"subject": "` + subject + `"}}]}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	model := map[string]string{"EA_LLM_BASE_URL": "http://localhost:11434/v1", "EA_LLM_MODEL": "llama3.2"}
	cfg, err := parseConfig("ea-node", []string{"--tools", file("ok.json", "weather.forecast")}, envOf(model))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tools.Tools) != 1 || cfg.Tools.Tools[0].NATS.Subject != "weather.forecast" {
		t.Errorf("tools %+v", cfg.Tools)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--tools", file("ok.json", "weather.forecast")}, nil, "--tools " + filepath.Join(dir, "ok.json") + " is set without --llm-base-url"},
		{[]string{"--tools", file("mbox.json", "ea.mbox.counter.c1")}, model, `subject ea.mbox.counter.c1 is under the runtime's prefix "ea"`},
		{[]string{"--prefix", "dev", "--tools", file("ctl.json", "dev.ctl.create.counter")}, model, `under the runtime's prefix "dev"`},
		{[]string{"--tools", filepath.Join(dir, "none.json")}, model, "none.json: no such file"},
	} {
		if _, err := parseConfig("ea-node", tc.args, envOf(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
