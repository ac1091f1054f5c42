package supervisord

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigurationDocumented: docs/orchestration.md's configuration table
// names every flag of ea-supervisor.
func TestConfigurationDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "orchestration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Configuration: `ea-supervisor`")
	if !ok {
		t.Fatal("docs/orchestration.md has no section \"Configuration: `ea-supervisor`\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var table strings.Builder
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `--") {
			table.WriteString(line + "\n")
		}
	}
	for _, s := range settings() {
		if !strings.Contains(table.String(), "`--"+s.Name+"`") {
			t.Errorf("docs/orchestration.md's configuration table does not name the flag --%s", s.Name)
		}
	}
}
