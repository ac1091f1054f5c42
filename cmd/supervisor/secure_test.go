package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/proctest"
)

// TestRunAsSupervisorRole runs ea-supervisor as user supervisor of the
// shipped roles (deploy/nats), its password from --password-file, against
// a server that a node provisioned.
func TestRunAsSupervisorRole(t *testing.T) {
	for user, pw := range map[string]string{"CLIENT": "c", "NODE": "n", "SUPERVISOR": "s-pw", "ADMIN": "a"} {
		t.Setenv("EA_"+user+"_PASSWORD", pw)
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ConfigFile: filepath.Join("..", "..", "deploy", "nats", "roles.conf")})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := writeFile(pwFile, "s-pw\n"); err != nil {
		t.Fatal(err)
	}
	var out, errOut proctest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats", srv.ClientURL(), "--user", "supervisor", "--password-file", pwFile, "--metrics", "off"}, envOf(nil), &out, &errOut)
	}()
	actortest.Eventually(t, 30*time.Second, "ea-supervisor ready as supervisor", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run as supervisor: %v\n%s", err, errOut.String())
		default:
		}
		return strings.Contains(out.String(), "ea-supervisor is ready")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(errOut.String()), "permissions violation") {
		t.Errorf("the supervisor role lacks a permission ea-supervisor needs:\n%s", errOut.String())
	}
}
