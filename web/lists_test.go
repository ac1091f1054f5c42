package web_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/web"
)

// pageAll follows a list request's cursor from the first page to the last
// and returns every item of the pages (under key) and how many pages it
// took, checking that no page is larger than limit.
func pageAll(t *testing.T, c *client, frame map[string]any, key string, limit int) ([]map[string]any, int) {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for pages := 1; ; pages++ {
		if pages > 100 {
			t.Fatalf("%v: more than 100 pages", frame)
		}
		f := map[string]any{}
		for k, v := range frame {
			f[k] = v
		}
		f["req"], f["limit"] = fmt.Sprintf("p%d", pages), limit
		if cursor != "" {
			f["cursor"] = cursor
		}
		r := c.call(f)
		if r["type"] != "result" {
			t.Fatalf("%v: %v", f, r)
		}
		res := r["result"].(map[string]any)
		items := res[key].([]any)
		if len(items) > limit {
			t.Fatalf("%v: %d items, limit %d", f, len(items), limit)
		}
		for _, it := range items {
			all = append(all, it.(map[string]any))
		}
		cursor, _ = res["cursor"].(string)
		if res["more"] != true {
			return all, pages
		}
		if cursor == "" {
			t.Fatalf("%v: more without a cursor: %v", f, res)
		}
	}
}

// TestListRequests: dead.list and orch.list against a real server, node,
// record store, supervisor and gateway, with two users and an admin:
// owner scoping (a user sees only its own and is refused another's),
// paging over several pages in both orders with no gap and no duplicate,
// the filters, bad cursors and page-size caps.
func TestListRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, usersFile(userLine("alice", "user", tokAlice), userLine("bob", "user", tokBob), userLine("ops", "admin", tokOps)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{supervisor: true, cfg: web.Config{UsersFile: path}})
	alice := e.dialAs(t, tokAlice, "alice", "user")
	bob := e.dialAs(t, tokBob, "bob", "user")
	ops := e.dialAs(t, tokOps, "ops", "admin")

	// Dead letters: 7 of alice's records, 3 of bob's (explode is rejected).
	const aliceDead, bobDead = 7, 3
	for _, u := range []struct {
		c    *client
		name string
		n    int
	}{{alice, "alice", aliceDead}, {bob, "bob", bobDead}} {
		if f := u.c.call(map[string]any{"type": "create", "req": "cr", "effector": "counter/" + u.name}); f["type"] != "result" {
			t.Fatalf("create: %v", f)
		}
		for i := range u.n {
			if f := u.c.call(map[string]any{"type": "send", "req": "s", "to": "counter/" + u.name, "any_type": true,
				"record": map[string]any{"id": fmt.Sprintf("%s-dead-%d", u.name, i), "type": "explode", "payload": map[string]any{"by": i}}}); f["type"] != "ack" {
				t.Fatalf("send: %v", f)
			}
		}
	}
	// Orchestrations: 4 of alice's, 2 of bob's, all waiting for input.
	var aliceOrchs, bobOrchs []string
	for i := range 6 {
		c, ids := alice, &aliceOrchs
		if i >= 4 {
			c, ids = bob, &bobOrchs
		}
		f := c.call(map[string]any{"type": "orch.start", "req": "os", "name": "demo", "input": map[string]any{"text": fmt.Sprintf("list %d", i)}})
		if f["type"] != "result" {
			t.Fatalf("orch.start: %v", f)
		}
		*ids = append(*ids, f["result"].(map[string]any)["id"].(string))
	}
	actortest.Eventually(t, 60*time.Second, "every dead letter and every orchestration waiting", func() bool {
		dead, _ := pageAll(t, ops, map[string]any{"type": "dead.list"}, "dead", web.MaxListLimit)
		orchs, _ := pageAll(t, ops, map[string]any{"type": "orch.list", "status": "WAITING"}, "orchestrations", web.MaxListLimit)
		return len(dead) == aliceDead+bobDead && len(orchs) == 6
	})

	{ // DeadLettersPagedNoGapNoDuplicate
		for _, order := range []string{"", "newest"} {
			got, pages := pageAll(t, alice, map[string]any{"type": "dead.list", "order": order}, "dead", 3)
			if pages != 3 || len(got) != aliceDead {
				t.Fatalf("alice's dead letters (order %q): %d in %d pages, want %d in 3", order, len(got), pages, aliceDead)
			}
			var seqs []uint64
			ids := map[string]bool{}
			for _, d := range got {
				seqs = append(seqs, num(d["seq"]))
				rec := d["record"].(map[string]any)
				if rec["owner"] != "alice" || d["effector"] != "counter/alice" || d["reason"] != "rejected" {
					t.Fatalf("alice lists %v", d)
				}
				ids[rec["id"].(string)] = true
			}
			want := slices.Clone(seqs)
			if order == "newest" {
				slices.SortFunc(want, func(a, b uint64) int { return int(b) - int(a) })
			} else {
				slices.Sort(want)
			}
			if !slices.Equal(seqs, want) || len(slices.Compact(slices.Clone(want))) != aliceDead || len(ids) != aliceDead {
				t.Fatalf("order %q: seqs %v, ids %v: want %d distinct in order", order, seqs, ids, aliceDead)
			}
			for i := range aliceDead {
				if !ids[fmt.Sprintf("alice-dead-%d", i)] {
					t.Fatalf("order %q: alice-dead-%d missing from %v", order, i, ids)
				}
			}
		}
	}
	{ // DeadLetterAsTheDeadFrameShowsIt
		sub := e.dialAs(t, tokAlice, "alice", "user")
		sub.write(map[string]any{"type": "subscribe", "sub": "d", "topic": "dead", "from": 1})
		frame := sub.next("alice-dead-2's dead frame", func(f map[string]any) bool {
			return f["type"] == "dead" && f["record"].(map[string]any)["id"] == "alice-dead-2"
		})
		delete(frame, "type")
		delete(frame, "sub")
		got, _ := pageAll(t, alice, map[string]any{"type": "dead.list", "text": "ALICE-DEAD-2"}, "dead", 10)
		if len(got) != 1 || !reflect.DeepEqual(got[0], frame) {
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(frame)
			t.Fatalf("dead.list text ALICE-DEAD-2: %s\nwant the dead frame's: %s", a, b)
		}
	}
	{ // OwnerScoping
		got, _ := pageAll(t, bob, map[string]any{"type": "dead.list"}, "dead", 50)
		if len(got) != bobDead {
			t.Fatalf("bob lists %d dead letters, want his %d", len(got), bobDead)
		}
		for _, d := range got {
			if d["record"].(map[string]any)["owner"] != "bob" {
				t.Fatalf("bob lists %v", d)
			}
		}
		refused(t, "bob lists the dead letters of alice's effector", bob.call(map[string]any{"type": "dead.list", "req": "f0", "effector": "counter/alice"}), web.CodeForbidden)
		// An effector that does not exist: no dead letters of bob's.
		if got, _ := pageAll(t, bob, map[string]any{"type": "dead.list", "effector": "counter/nobody"}, "dead", 50); len(got) != 0 {
			t.Fatalf("bob lists dead letters of counter/nobody: %v", got)
		}
		if got, _ := pageAll(t, bob, map[string]any{"type": "dead.list", "kind": "counter", "text": "alice"}, "dead", 50); len(got) != 0 {
			t.Fatalf("bob finds alice's dead letters by a search: %v", got)
		}
		refused(t, "bob lists alice's dead letters", bob.call(map[string]any{"type": "dead.list", "req": "f1", "owner": "alice"}), web.CodeForbidden)
		refused(t, "bob lists alice's orchestrations", bob.call(map[string]any{"type": "orch.list", "req": "f2", "owner": "alice"}), web.CodeForbidden)
		if got, _ := pageAll(t, ops, map[string]any{"type": "dead.list", "owner": "bob"}, "dead", 50); len(got) != bobDead {
			t.Fatalf("the admin lists bob's dead letters: %d, want %d", len(got), bobDead)
		}
		orchs, _ := pageAll(t, bob, map[string]any{"type": "orch.list"}, "orchestrations", 50)
		if ids := orchIDs(orchs); !sameSet(ids, bobOrchs) {
			t.Fatalf("bob lists orchestrations %v, want his %v", ids, bobOrchs)
		}
	}
	{ // DeadLetterFilters
		now := time.Now().UTC()
		for _, c := range []struct {
			what  string
			frame map[string]any
			want  int
		}{
			{"one effector", map[string]any{"effector": "counter/bob"}, bobDead},
			{"a kind", map[string]any{"kind": "counter"}, aliceDead + bobDead},
			{"another kind", map[string]any{"kind": "task-a"}, 0},
			{"a reason", map[string]any{"reason": "rejected"}, aliceDead + bobDead},
			{"another reason", map[string]any{"reason": "decode"}, 0},
			{"a search of the error", map[string]any{"text": "EXPLODE"}, aliceDead + bobDead},
			{"a search of an id", map[string]any{"text": "bob-dead-1"}, 1},
			{"since an hour ago", map[string]any{"since": now.Add(-time.Hour)}, aliceDead + bobDead},
			{"since later", map[string]any{"since": now.Add(time.Hour)}, 0},
			{"until an hour ago", map[string]any{"until": now.Add(-time.Hour), "order": "newest"}, 0},
			{"until later, newest first", map[string]any{"until": now.Add(time.Hour), "order": "newest"}, aliceDead + bobDead},
		} {
			f := map[string]any{"type": "dead.list"}
			for k, v := range c.frame {
				f[k] = v
			}
			if got, _ := pageAll(t, ops, f, "dead", 4); len(got) != c.want {
				t.Fatalf("dead.list %s: %d, want %d", c.what, len(got), c.want)
			}
		}
	}
	{ // OrchestrationsPagedNoGapNoDuplicate
		for _, order := range []string{"", "newest"} {
			got, pages := pageAll(t, alice, map[string]any{"type": "orch.list", "order": order}, "orchestrations", 3)
			ids := orchIDs(got)
			if pages != 2 || len(ids) != len(aliceOrchs) || !sameSet(ids, aliceOrchs) {
				t.Fatalf("alice's orchestrations (order %q): %v in %d pages, want %v in 2", order, ids, pages, aliceOrchs)
			}
			var revs []uint64
			for _, o := range got {
				if o["owner"] != "alice" || o["name"] != "demo" {
					t.Fatalf("alice lists %v", o)
				}
				revs = append(revs, num(o["revision"]))
			}
			sorted := slices.Clone(revs)
			slices.Sort(sorted)
			if order == "newest" {
				slices.Reverse(sorted)
			}
			if !slices.Equal(revs, sorted) {
				t.Fatalf("order %q: revisions %v not in order", order, revs)
			}
		}
	}
	{ // OrchestrationFilters
		now := time.Now().UTC()
		for _, c := range []struct {
			what  string
			frame map[string]any
			want  int
		}{
			{"by name", map[string]any{"name": "demo"}, 6},
			{"another name", map[string]any{"name": "nope"}, 0},
			{"waiting", map[string]any{"status": "WAITING"}, 6},
			{"completed", map[string]any{"status": "COMPLETED"}, 0},
			{"a search of an id", map[string]any{"search": aliceOrchs[1]}, 1},
			{"a search of the name", map[string]any{"search": "DEM"}, 6},
			{"started since an hour ago", map[string]any{"since": now.Add(-time.Hour), "order": "newest"}, 6},
			{"started since later", map[string]any{"since": now.Add(time.Hour)}, 0},
			{"started until an hour ago", map[string]any{"until": now.Add(-time.Hour)}, 0},
			{"bob's", map[string]any{"owner": "bob"}, 2},
		} {
			f := map[string]any{"type": "orch.list"}
			for k, v := range c.frame {
				f[k] = v
			}
			if got, _ := pageAll(t, ops, f, "orchestrations", 4); len(got) != c.want {
				t.Fatalf("orch.list %s: %d, want %d", c.what, len(got), c.want)
			}
		}
	}
	{ // BadCursorsAndLimits
		first := alice.call(map[string]any{"type": "dead.list", "req": "c0", "limit": 2})
		cursor := first["result"].(map[string]any)["cursor"].(string)
		ofirst := alice.call(map[string]any{"type": "orch.list", "req": "c1", "limit": 2})
		ocursor := ofirst["result"].(map[string]any)["cursor"].(string)
		for _, c := range []struct {
			what  string
			frame map[string]any
		}{
			{"a cursor that is no cursor", map[string]any{"type": "dead.list", "cursor": "garbage!"}},
			{"a cursor of another query", map[string]any{"type": "dead.list", "cursor": cursor, "reason": "rejected"}},
			{"a cursor of another order", map[string]any{"type": "dead.list", "cursor": cursor, "order": "newest"}},
			{"an orchestration cursor for dead letters", map[string]any{"type": "dead.list", "cursor": ocursor}},
			{"a dead-letter cursor for orchestrations", map[string]any{"type": "orch.list", "cursor": cursor}},
			{"a page too large", map[string]any{"type": "dead.list", "limit": web.MaxListLimit + 1}},
			{"a negative page", map[string]any{"type": "orch.list", "limit": -1}},
			{"an orchestration page too large", map[string]any{"type": "orch.list", "limit": 1000}},
			{"an unknown order", map[string]any{"type": "dead.list", "order": "sideways"}},
			{"an unknown field", map[string]any{"type": "orch.list", "kind": "counter"}},
			{"effector and kind", map[string]any{"type": "dead.list", "effector": "counter/alice", "kind": "counter"}},
			{"a bad effector", map[string]any{"type": "dead.list", "effector": "counter"}},
			{"a bad kind", map[string]any{"type": "dead.list", "kind": "a.b"}},
			{"until before since", map[string]any{"type": "dead.list", "since": time.Now(), "until": time.Now().Add(-time.Hour)}},
			{"a time that is no time", map[string]any{"type": "orch.list", "since": "yesterday"}},
			{"an unknown status", map[string]any{"type": "orch.list", "status": "SLEEPING"}},
			{"a search too long", map[string]any{"type": "orch.list", "search": string(make([]byte, 300))}},
		} {
			c.frame["req"] = "bad"
			refused(t, c.what, alice.call(c.frame), web.CodeBadRequest)
		}
		// The good cursor still works after all that.
		if f := alice.call(map[string]any{"type": "dead.list", "req": "c2", "limit": 2, "cursor": cursor}); f["type"] != "result" {
			t.Fatalf("second page: %v", f)
		}
	}
}

func orchIDs(orchs []map[string]any) []string {
	var ids []string
	for _, o := range orchs {
		ids = append(ids, o["id"].(string))
	}
	return ids
}

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) && len(slices.Compact(a)) == len(b)
}
