package nats_test

import (
	"os"
	"strings"
	"testing"

	"github.com/effectors/effectors/internal/roles"
)

// TestShippedRolesAreGenerated: roles.conf and nsc.sh are exactly what
// "ea roles" and "ea roles --nsc" print for the default layout, so that
// the files operators read and the generator never drift apart. Run
// "go run ./cmd/ea roles > deploy/nats/roles.conf" and
// "go run ./cmd/ea roles --nsc > deploy/nats/nsc.sh" after changing the
// roles.
func TestShippedRolesAreGenerated(t *testing.T) {
	r, err := roles.For(roles.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	for file, write := range map[string]func(*strings.Builder) error{
		"roles.conf": func(b *strings.Builder) error { return r.WriteServerConfig(b) },
		"nsc.sh":     func(b *strings.Builder) error { return r.WriteNSC(b) },
	} {
		var want strings.Builder
		if err := write(&want); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want.String() {
			t.Errorf("deploy/nats/%s is not the generator's output for the default layout: regenerate it (see the comment of this test)", file)
		}
	}
}
