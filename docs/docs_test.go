// Package docs_test checks the documentation against itself: the README's
// contents name every document here.
package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeIndex: the README's contents (the paragraph that starts
// "**Contents:**") link every document of docs/.
func TestReadmeIndex(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, contents, ok := strings.Cut(string(b), "**Contents:**")
	if !ok {
		t.Fatal("README.md has no **Contents:**")
	}
	contents, _, _ = strings.Cut(contents, "\n\n")
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no documents in docs/")
	}
	for _, d := range docs {
		if !strings.Contains(contents, "](docs/"+d+")") {
			t.Errorf("the README's contents do not link docs/%s", d)
		}
	}
}
