package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/web"
)

// TestNoOwnerRefusal: a user refused an effector, a record or a dead letter
// that has no owner (made with the ea CLI or a Go client) is told it has no
// owner, not that it belongs to another user; one of another user is told
// that, as before.
func TestNoOwnerRefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, usersFile(userLine("alice", "user", tokAlice), userLine("bob", "user", tokBob)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{cfg: web.Config{UsersFile: path}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shared := records.Ref{Kind: "counter", ID: "shared"}
	if _, err := e.actors.Create(ctx, shared, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := records.New("nope", map[string]int{"by": 1}) // no owner; dead-lettered: unknown type
	if err != nil {
		t.Fatal(err)
	}
	rec.ID = "ownerless-1"
	if _, err := e.actors.Send(ctx, shared, rec); err != nil {
		t.Fatal(err)
	}
	alice := e.dialAs(t, tokAlice, "alice", "user")
	if f := alice.call(map[string]any{"type": "create", "req": "c", "effector": "counter/alice"}); f["type"] != "result" {
		t.Fatalf("alice creates: %v", f)
	}
	bob := e.dialAs(t, tokBob, "bob", "user")

	says := func(what string, f map[string]any, want string) {
		t.Helper()
		refused(t, what, f, web.CodeForbidden)
		msg := fmt.Sprint(f["error"])
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
		if want == "has no owner" && strings.Contains(msg, "another user") {
			t.Errorf("%s: %q says another user", what, msg)
		}
	}
	says("state of an effector with no owner", bob.call(map[string]any{"type": "state", "req": "s1", "effector": "counter/shared"}), "has no owner")
	says("send to an effector with no owner", bob.call(map[string]any{"type": "send", "req": "s2", "to": "counter/shared", "record": map[string]any{"type": "inc"}}), "has no owner")
	says("state of alice's effector", bob.call(map[string]any{"type": "state", "req": "s3", "effector": "counter/alice"}), "belongs to another user")

	// The record, once the record store has it, and its dead letter.
	var f map[string]any
	actortest.Eventually(t, 20*time.Second, "the record store has the record", func() bool {
		f = bob.call(map[string]any{"type": "get", "req": "g", "id": "ownerless-1"})
		return f["code"] != web.CodeNotFound
	})
	says("get of a record with no owner", f, "has no owner")
	var seq uint64
	actortest.Eventually(t, 20*time.Second, "the dead letter", func() bool {
		s, err := e.conn.JetStream().Stream(ctx, e.conn.Names().DeadStream())
		if err != nil {
			t.Fatal(err)
		}
		seq = s.CachedInfo().State.LastSeq
		return seq > 0
	})
	says("replay of a dead letter with no owner", bob.call(map[string]any{"type": "dead.replay", "req": "d", "seq": seq}), "has no owner")
}
