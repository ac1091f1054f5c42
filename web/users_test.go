package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/web"
)

// Tokens of the users test: two users, an admin from the users file, and
// the shared token (the admin "admin").
const (
	tokAlice  = "alice-0123456789abcdef0123456789abcdef"
	tokBob    = "bob-0123456789abcdef0123456789abcdef"
	tokOps    = "ops-0123456789abcdef0123456789abcdef"
	tokShared = "shared-0123456789abcdef0123456789abcdef"
	tokCarol  = "carol-0123456789abcdef0123456789abcdef" // revoked during the test
)

func usersFile(lines ...string) []byte {
	return []byte("# test users\n" + strings.Join(lines, "\n") + "\n")
}

func userLine(name, role, token string) string {
	return name + " " + role + " " + web.HashToken(token)
}

// dialAs connects with token in the Authorization header and returns the
// client after its welcome frame, checking the identity it announces.
func (e *env) dialAs(t *testing.T, token, user, role string) *client {
	t.Helper()
	c := e.dial(t, http.Header{"Authorization": {"Bearer " + token}})
	w := c.next("welcome", isType("welcome"))
	if w["user"] != user || w["role"] != role {
		t.Fatalf("welcome as %s/%s: %v", user, role, w)
	}
	return c
}

// call writes frame v (its "req" must be set) and returns the answer.
func (c *client) call(v map[string]any) map[string]any {
	c.t.Helper()
	c.write(v)
	return c.reply(v["req"].(string))
}

// refused checks that f is an error frame with code.
func refused(t *testing.T, what string, f map[string]any, code string) {
	t.Helper()
	if f["type"] != "error" || f["code"] != code {
		t.Fatalf("%s: %v, want an error with code %s", what, f, code)
	}
}

func TestUsers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users")
	lines := []string{
		userLine("alice", "user", tokAlice), userLine("bob", "user", tokBob),
		userLine("ops", "admin", tokOps), userLine("carol", "user", tokCarol),
	}
	if err := os.WriteFile(path, usersFile(lines...), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{supervisor: true, cfg: web.Config{
		UsersFile: path, Token: tokShared, UsersReload: 50 * time.Millisecond, AuthTimeout: time.Second,
	}})
	ctx := context.Background()
	alice := e.dialAs(t, tokAlice, "alice", "user")
	bob := e.dialAs(t, tokBob, "bob", "user")
	ops := e.dialAs(t, tokOps, "ops", "admin")
	shared := e.dialAs(t, tokShared, "admin", "admin")

	// Each user creates a counter; the effector is theirs.
	for _, u := range []struct {
		c    *client
		name string
	}{{alice, "alice"}, {bob, "bob"}} {
		f := u.c.call(map[string]any{"type": "create", "req": "cr", "effector": "counter/" + u.name})
		if f["type"] != "result" || f["result"].(map[string]any)["owner"] != u.name {
			t.Fatalf("create by %s: %v", u.name, f)
		}
	}
	// A user cannot create for someone else; an admin can.
	refused(t, "alice creates for bob", alice.call(map[string]any{"type": "create", "req": "x", "effector": "counter/x", "owner": "bob"}), web.CodeForbidden)
	if f := ops.call(map[string]any{"type": "create", "req": "cr", "effector": "counter/alice2", "owner": "alice"}); f["result"].(map[string]any)["owner"] != "alice" {
		t.Fatalf("admin creates for alice: %v", f)
	}

	// Sends carry EA-Owner from the identity.
	send := func(c *client, to, id, typ string) map[string]any {
		return c.call(map[string]any{"type": "send", "req": "s-" + id, "to": to, "any_type": typ != "inc",
			"record": map[string]any{"id": id, "type": typ, "process": "p-" + id, "payload": map[string]any{"by": 1}}})
	}
	ack := send(alice, "counter/alice", "a-1", "inc")
	if ack["type"] != "ack" {
		t.Fatalf("alice's send: %v", ack)
	}
	stream, err := e.conn.JetStream().Stream(ctx, e.conn.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.GetMsg(ctx, num(ack["seq"])); err != nil || msg.Header.Get(records.HeaderOwner) != "alice" {
		t.Fatalf("stored record of alice: %v %v", msg, err)
	}
	// A client-provided owner: refused for a user, honoured for an admin.
	f := alice.call(map[string]any{"type": "send", "req": "so", "to": "counter/alice",
		"record": map[string]any{"type": "inc", "owner": "bob"}})
	refused(t, "alice sends as bob", f, web.CodeForbidden)
	if f := alice.call(map[string]any{"type": "send", "req": "so2", "to": "counter/alice",
		"record": map[string]any{"type": "inc", "owner": "alice"}}); f["type"] != "ack" {
		t.Fatalf("alice names herself as owner: %v", f)
	}
	if ack := send(bob, "counter/bob", "b-1", "inc"); ack["type"] != "ack" {
		t.Fatalf("bob's send: %v", ack)
	}
	// Records that become dead letters: alice's first, then bob's.
	if ack := send(alice, "counter/alice", "a-dead", "nope"); ack["type"] != "ack" {
		t.Fatalf("alice's bad send: %v", ack)
	}
	if ack := send(bob, "counter/bob", "b-dead", "nope"); ack["type"] != "ack" {
		t.Fatalf("bob's bad send: %v", ack)
	}
	// Alice's orchestration.
	st := alice.call(map[string]any{"type": "orch.start", "req": "os", "name": "demo", "input": map[string]any{"text": "alice's"}})
	if st["type"] != "result" {
		t.Fatalf("alice starts: %v", st)
	}
	orchID := st["result"].(map[string]any)["id"].(string)

	{ // AnotherUsersThings
		for _, tc := range []struct {
			name  string
			frame map[string]any
			code  string
		}{
			{"send", map[string]any{"type": "send", "to": "counter/alice", "record": map[string]any{"type": "inc"}}, web.CodeForbidden},
			{"state", map[string]any{"type": "state", "effector": "counter/alice"}, web.CodeForbidden},
			{"terminate", map[string]any{"type": "terminate", "effector": "counter/alice"}, web.CodeForbidden},
			{"state of nothing", map[string]any{"type": "state", "effector": "counter/nobody"}, web.CodeNotFound},
			{"get alice's record", map[string]any{"type": "get", "id": "a-1"}, web.CodeForbidden},
			{"query alice's records", map[string]any{"type": "query", "query": map[string]any{"owner": "alice"}}, web.CodeForbidden},
			{"list alice's effectors", map[string]any{"type": "effectors", "kind": "counter", "owner": "alice"}, web.CodeForbidden},
			{"orch.status", map[string]any{"type": "orch.status", "id": orchID}, web.CodeForbidden},
			{"orch.input", map[string]any{"type": "orch.input", "id": orchID, "input": map[string]any{"note": "bob's"}}, web.CodeForbidden},
			{"orch.cancel", map[string]any{"type": "orch.cancel", "id": orchID}, web.CodeForbidden},
			{"orch.status of nothing", map[string]any{"type": "orch.status", "id": "no-such-orch"}, web.CodeNotFound},
			{"orch.start as alice", map[string]any{"type": "orch.start", "name": "demo", "owner": "alice"}, web.CodeForbidden},
			{"subscribe outbox", map[string]any{"type": "subscribe", "sub": "s", "topic": "outbox", "effector": "counter/alice", "from": 1}, web.CodeForbidden},
			{"subscribe mailbox", map[string]any{"type": "subscribe", "sub": "s", "topic": "mailbox", "effector": "counter/alice", "from": 1}, web.CodeForbidden},
			{"subscribe state", map[string]any{"type": "subscribe", "sub": "s", "topic": "state", "effector": "counter/alice"}, web.CodeForbidden},
			{"subscribe records", map[string]any{"type": "subscribe", "sub": "s", "topic": "records", "effector": "counter/alice"}, web.CodeForbidden},
			{"subscribe dead", map[string]any{"type": "subscribe", "sub": "s", "topic": "dead", "effector": "counter/alice", "from": 1}, web.CodeForbidden},
			{"subscribe orchestration", map[string]any{"type": "subscribe", "sub": "s", "topic": "orchestration", "id": orchID, "from": 1}, web.CodeForbidden},
			{"subscribe nothing's state", map[string]any{"type": "subscribe", "sub": "s", "topic": "state", "effector": "counter/nobody"}, web.CodeNotFound},
		} {
			tc.frame["req"] = "x-" + tc.name
			f := bob.call(tc.frame)
			refused(t, tc.name, f, tc.code)
			if strings.Contains(fmt.Sprint(f), "by\":") {
				t.Fatalf("%s: the refusal shows content: %v", tc.name, f)
			}
		}
		// Nothing of alice's state changed: her counter still counts 2.
		doc, err := e.actors.State(ctx, records.Ref{Kind: "counter", ID: "alice"})
		if err != nil || doc.Status == "TERMINATED" || doc.Owner != "alice" {
			t.Fatalf("alice's counter: %+v %v", doc, err)
		}
		// The orchestration was neither cancelled nor given input.
		if f := alice.call(map[string]any{"type": "orch.status", "req": "ost"}); f["type"] != "error" {
			t.Fatalf("orch.status without id: %v", f)
		}
		if f := alice.call(map[string]any{"type": "orch.status", "req": "ost2", "id": orchID}); f["type"] != "result" || f["result"].(map[string]any)["owner"] != "alice" || f["result"].(map[string]any)["status"] == "CANCELLED" {
			t.Fatalf("alice's orchestration: %v", f)
		}
	}

	{ // UsersSeeTheirOwn
		// Effector lists.
		names := func(c *client, req string) []string {
			f := c.call(map[string]any{"type": "effectors", "req": req, "kind": "counter"})
			var out []string
			for _, e := range f["result"].(map[string]any)["effectors"].([]any) {
				out = append(out, e.(map[string]any)["id"].(string))
			}
			return out
		}
		if got := strings.Join(names(bob, "l"), ","); got != "bob" {
			t.Fatalf("bob lists %q, want bob only", got)
		}
		if got := names(ops, "l"); len(got) < 3 {
			t.Fatalf("the admin lists %q, want alice, alice2 and bob at least", got)
		}
		// Queries: every record a user is shown carries its name, and its
		// own records are there.
		waitQuery := func(c *client, q map[string]any, wantID string) []any {
			t.Helper()
			var recs []any
			actortest.Eventually(t, 15*time.Second, "query shows "+wantID, func() bool {
				f := c.call(map[string]any{"type": "query", "req": "q", "query": q})
				recs = f["result"].(map[string]any)["records"].([]any)
				for _, r := range recs {
					if r.(map[string]any)["id"] == wantID {
						return true
					}
				}
				return false
			})
			return recs
		}
		for _, r := range waitQuery(bob, map[string]any{"limit": 1000}, "b-1") {
			if o := r.(map[string]any)["owner"]; o != "bob" {
				t.Fatalf("bob's query shows a record of %v: %v", o, r)
			}
		}
		// Even when naming alice's process, bob sees nothing of it.
		if f := bob.call(map[string]any{"type": "query", "req": "qp", "query": map[string]any{"process": "p-a-1"}}); len(f["result"].(map[string]any)["records"].([]any)) != 0 {
			t.Fatalf("bob queries alice's process: %v", f)
		}
		// The admin sees alice's, and may filter by owner.
		for _, r := range waitQuery(ops, map[string]any{"owner": "alice", "limit": 1000}, "a-1") {
			if o := r.(map[string]any)["owner"]; o != "alice" {
				t.Fatalf("the admin's query by owner alice shows %v", r)
			}
		}
		waitQuery(shared, map[string]any{"process": "p-a-1"}, "a-1")
		if f := shared.call(map[string]any{"type": "get", "req": "g", "id": "a-1"}); f["type"] != "result" {
			t.Fatalf("the admin gets alice's record: %v", f)
		}
		if f := alice.call(map[string]any{"type": "get", "req": "g", "id": "a-1"}); f["type"] != "result" {
			t.Fatalf("alice gets her record: %v", f)
		}
	}

	{ // SubscriptionsShowOnlyOwn
		// bob follows every counter's outbox, all dead letters and every
		// orchestration from the start of the log: what he is shown carries
		// his name, and his own things arrive.
		// Written at once and read in one loop: the frames of the first
		// subscriptions come while the others are answered.
		for name, frame := range map[string]map[string]any{
			"out":   {"topic": "outbox", "kind": "counter", "from": 1},
			"dead":  {"topic": "dead", "from": 1},
			"orch":  {"topic": "orchestration"},
			"state": {"topic": "state", "kind": "counter"},
			"rec":   {"topic": "records", "effector": "counter/bob"},
		} {
			frame["type"], frame["sub"], frame["req"] = "subscribe", name, name
			bob.write(frame)
		}
		bob.write(map[string]any{"type": "orch.start", "req": "bos", "name": "demo", "input": map[string]any{"text": "bob's"}})
		var bobOrchID any
		bobOrchs := map[any]bool{}
		seen := map[string]bool{}
		subscribed := 0
		for subscribed < 5 || bobOrchID == nil || !(seen["out"] && seen["dead"] && bobOrchs[bobOrchID] && seen["state"] && seen["rec"]) {
			f := bob.next(fmt.Sprintf("bob's frames (seen %v, %d subscribed, orchestration %v)", seen, subscribed, bobOrchID), nil)
			switch f["type"] {
			case "subscribed":
				subscribed++
			case "result":
				if f["req"] != "bos" {
					t.Fatalf("unexpected result: %v", f)
				}
				bobOrchID = f["result"].(map[string]any)["id"]
			case "record":
				if r := f["record"].(map[string]any); r["owner"] != "bob" {
					t.Fatalf("bob's outbox subscription shows %v", f)
				} else if r["cause"] == "b-1" {
					seen["out"] = true
				}
			case "dead":
				if r := f["record"].(map[string]any); r["owner"] != "bob" {
					t.Fatalf("bob's dead letters show %v", f)
				} else if r["id"] == "b-dead" {
					seen["dead"] = true
				}
			case "orchestration":
				if o := f["orchestration"].(map[string]any); o["owner"] != "bob" {
					t.Fatalf("bob's orchestrations show %v", f)
				} else {
					bobOrchs[f["id"]] = true
				}
			case "state":
				if f["effector"] != "counter/bob" {
					t.Fatalf("bob's state subscription shows %v", f)
				}
				seen["state"] = true
			case "records":
				for _, r := range f["records"].([]any) {
					if r.(map[string]any)["owner"] != "bob" {
						t.Fatalf("bob's records show %v", r)
					}
					if r.(map[string]any)["id"] == "b-1" {
						seen["rec"] = true
					}
				}
			case "error":
				t.Fatalf("bob's subscription failed: %v", f)
			}
		}
		// The admin's dead-letter subscription shows alice's too.
		if f := ops.call(map[string]any{"type": "subscribe", "req": "d", "sub": "d", "topic": "dead", "effector": "counter/alice", "from": 1}); f["type"] != "subscribed" {
			t.Fatalf("admin subscribes to alice's dead letters: %v", f)
		}
		if f := ops.next("alice's dead letter", isType("dead")); f["record"].(map[string]any)["id"] != "a-dead" {
			t.Fatalf("admin's dead letter: %v", f)
		}
		// The shared token acts on alice's orchestration.
		if f := shared.call(map[string]any{"type": "orch.cancel", "req": "oc", "id": orchID}); f["type"] != "result" {
			t.Fatalf("admin cancels alice's orchestration: %v", f)
		}
	}

	t.Run("BadAndHugeTokens", func(t *testing.T) {
		huge := strings.Repeat("x", web.MaxToken+1)
		for _, tc := range []struct {
			name  string
			hdr   http.Header
			frame any
			want  string
		}{
			{"wrong header", http.Header{"Authorization": {"Bearer " + tokAlice + "x"}}, nil, "wrong token"},
			{"not bearer", http.Header{"Authorization": {"Basic " + tokAlice}}, nil, "Bearer"},
			{"wrong frame", nil, map[string]any{"type": "auth", "token": "nope"}, "wrong token"},
			{"the hash as token", nil, map[string]any{"type": "auth", "token": web.HashToken(tokAlice)}, "wrong token"},
			{"huge header", http.Header{"Authorization": {"Bearer " + huge}}, nil, "longer than"},
			{"huge frame", nil, map[string]any{"type": "auth", "token": huge}, "longer than"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := e.dial(t, tc.hdr)
				if tc.frame != nil {
					c.write(tc.frame)
				}
				if ce := c.closed(); ce.Code != web.CloseUnauthorized || !strings.Contains(ce.Reason, tc.want) {
					t.Fatalf("close %v, want %d %q", ce, web.CloseUnauthorized, tc.want)
				}
				select {
				case f := <-c.frames:
					t.Fatalf("unauthorized client got a frame: %v", f)
				default:
				}
			})
		}
	})

	{ // AuthFrameAfterAuthorized
		c := e.dial(t, nil)
		c.write(map[string]any{"type": "auth", "req": "a1", "token": tokAlice})
		if w := c.reply("a1"); w["type"] != "welcome" || w["user"] != "alice" {
			t.Fatalf("welcome answering the auth frame's req: %v", w)
		}
		if f := c.call(map[string]any{"type": "auth", "req": "a2", "token": tokAlice}); f["type"] != "result" ||
			f["result"].(map[string]any)["authorized"] != true || f["result"].(map[string]any)["user"] != "alice" {
			t.Fatalf("auth again with the same token: %v", f)
		}
		refused(t, "auth as bob on alice's connection", c.call(map[string]any{"type": "auth", "req": "a3", "token": tokBob}), web.CodeBadRequest)
		c.write(map[string]any{"type": "auth", "req": "a4", "token": "wrong"})
		if ce := c.closed(); ce.Code != web.CloseUnauthorized || !strings.Contains(ce.Reason, "wrong token") {
			t.Fatalf("a wrong token after header auth: close %v", ce)
		}
	}

	{ // Revoked
		carol := e.dialAs(t, tokCarol, "carol", "user")
		// A broken file changes nothing: the users as last read stay.
		if err := os.WriteFile(path, []byte("carol user not-a-hash\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		actortest.Eventually(t, 10*time.Second, "the broken file seen", func() bool {
			return e.metric(t, "ea_gateway_users_reloads_total", "outcome", "failed") >= 1
		})
		if f := carol.call(map[string]any{"type": "ping", "req": "p"}); f["type"] != "pong" {
			t.Fatalf("carol after a broken users file: %v", f)
		}
		// Carol's line goes: her connection is closed, her token refused.
		if err := os.WriteFile(path, usersFile(lines[:3]...), 0o600); err != nil {
			t.Fatal(err)
		}
		if ce := carol.closed(); ce.Code != web.CloseUnauthorized || !strings.Contains(ce.Reason, "revoked") {
			t.Fatalf("carol's connection: close %v, want %d revoked", ce, web.CloseUnauthorized)
		}
		c := e.dial(t, http.Header{"Authorization": {"Bearer " + tokCarol}})
		if ce := c.closed(); ce.Code != web.CloseUnauthorized || !strings.Contains(ce.Reason, "wrong token") {
			t.Fatalf("carol again: close %v", ce)
		}
		// The others stay connected.
		if f := alice.call(map[string]any{"type": "ping", "req": "p"}); f["type"] != "pong" {
			t.Fatalf("alice after carol's revocation: %v", f)
		}
	}
}

func TestParseUsers(t *testing.T) {
	h := web.HashToken("t")
	for _, tc := range []struct {
		name, file, want string // want "" valid
	}{
		{"ok", "# c\n\nalice user " + h + "\n  ops\tadmin " + web.HashToken("u") + "\n", ""},
		{"two tokens one name", "a user " + h + "\na user " + web.HashToken("u"), ""},
		{"plaintext token", "alice user t", "must start with \"sha256:\""},
		{"short hash", "alice user sha256:abcd", "64 hex digits"},
		{"bad hex", "alice user sha256:" + strings.Repeat("zz", 32), "64 hex digits"},
		{"missing field", "alice " + h, "want 3"},
		{"bad role", "alice root " + h, "want user or admin"},
		{"bad name", "al\x01ice user " + h, "name"},
		{"two roles", "a user " + h + "\na admin " + web.HashToken("u"), "one role per name"},
		{"shared hash", "a user " + h + "\nb user " + h, "earlier line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := web.ParseUsers([]byte(tc.file))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, web.ErrInvalid)):
				t.Fatalf("got %v, want an ErrInvalid containing %q", err, tc.want)
			case tc.want == "":
				if id, ok := u.Lookup("t"); !ok || id.Name == "" {
					t.Fatalf("lookup of t: %v %v", id, ok)
				}
				if _, ok := u.Lookup(h); ok {
					t.Fatal("the hash itself authenticates")
				}
			}
		})
	}
	if _, err := web.LoadUsers(filepath.Join(t.TempDir(), "none")); !errors.Is(err, web.ErrInvalid) {
		t.Fatalf("missing file: %v", err)
	}
}
