package web_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/web"
)

// TestConsoleRequests: dead.replay, dead.discard and nodes against a real
// server, node, record store and gateway, with two users and an admin: the
// owner replays her dead letter (a new record caused by the original, with
// her EA-Owner) and discards it; another user is refused both, and the node
// view is the admin's only (with a lease of a node gone shown unheld).
func TestConsoleRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, usersFile(userLine("alice", "user", tokAlice), userLine("bob", "user", tokBob), userLine("ops", "admin", tokOps)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{cfg: web.Config{UsersFile: path}})
	ctx := context.Background()
	alice := e.dialAs(t, tokAlice, "alice", "user")
	bob := e.dialAs(t, tokBob, "bob", "user")
	ops := e.dialAs(t, tokOps, "ops", "admin")

	if f := alice.call(map[string]any{"type": "create", "req": "cr", "effector": "counter/alice"}); f["type"] != "result" {
		t.Fatalf("create: %v", f)
	}
	if f := alice.call(map[string]any{"type": "send", "req": "s1", "to": "counter/alice", "any_type": true,
		"record": map[string]any{"id": "boom-1", "type": "explode", "payload": map[string]any{"by": 1}}}); f["type"] != "ack" {
		t.Fatalf("send: %v", f)
	}
	// Her dead letters on a connection of their own (a dead frame may come
	// before a request's answer, which reply would skip).
	aliceDead := e.dialAs(t, tokAlice, "alice", "user")
	aliceDead.write(map[string]any{"type": "subscribe", "req": "d", "sub": "dead", "topic": "dead", "from": 1})
	dead := aliceDead.next("the dead letter", func(f map[string]any) bool {
		return f["type"] == "dead" && f["record"].(map[string]any)["id"] == "boom-1"
	})
	seq := num(dead["seq"])

	// Refusals: bad input, another user's dead letter, the node view.
	refused(t, "replay without seq", alice.call(map[string]any{"type": "dead.replay", "req": "r0"}), web.CodeBadRequest)
	refused(t, "replay of a dead letter that is not there", alice.call(map[string]any{"type": "dead.replay", "req": "r1", "seq": seq + 1000}), web.CodeNotFound)
	refused(t, "replay with an unknown field", alice.call(map[string]any{"type": "dead.replay", "req": "r2", "seq": seq, "to": "x"}), web.CodeBadRequest)
	refused(t, "bob replays alice's dead letter", bob.call(map[string]any{"type": "dead.replay", "req": "r3", "seq": seq}), web.CodeForbidden)
	refused(t, "bob discards alice's dead letter", bob.call(map[string]any{"type": "dead.discard", "req": "r4", "seq": seq}), web.CodeForbidden)
	refused(t, "a user asks for the nodes", alice.call(map[string]any{"type": "nodes", "req": "n0"}), web.CodeForbidden)

	// Alice replays it: a new record, caused by the original, hers.
	f := alice.call(map[string]any{"type": "dead.replay", "req": "r5", "seq": seq})
	if f["type"] != "result" {
		t.Fatalf("replay: %v", f)
	}
	res := f["result"].(map[string]any)
	if res["cause"] != "boom-1" || res["id"] == "boom-1" || res["id"] == "" || res["effector"] != "counter/alice" || res["type"] != "explode" || num(res["dead_seq"]) != seq {
		t.Fatalf("replay result %v: want a new record caused by boom-1 to counter/alice", res)
	}
	m, err := e.conn.StoredAt(ctx, e.conn.Names().MailboxStream(), num(res["seq"]), "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(records.HeaderID) != res["id"] || m.Header.Get(records.HeaderCause) != "boom-1" || m.Header.Get(records.HeaderOwner) != "alice" {
		t.Fatalf("replayed record's headers %v", m.Header)
	}
	// The replay fails again (explode is always rejected): its own dead
	// letter, caused by the original.
	aliceDead.next("the replay's dead letter", func(f map[string]any) bool {
		return f["type"] == "dead" && f["record"].(map[string]any)["id"] == res["id"] && f["record"].(map[string]any)["cause"] == "boom-1"
	})

	// Discard: gone from the stream; a second discard is not_found.
	if f := alice.call(map[string]any{"type": "dead.discard", "req": "x1", "seq": seq}); f["type"] != "result" || f["result"].(map[string]any)["discarded"] != true {
		t.Fatalf("discard: %v", f)
	}
	if _, err := e.conn.StoredAt(ctx, e.conn.Names().DeadStream(), seq, ""); !errors.Is(err, bus.ErrNoMessage) {
		t.Fatalf("dead letter #%d after discard: %v, want gone", seq, err)
	}
	refused(t, "discard twice", alice.call(map[string]any{"type": "dead.discard", "req": "x2", "seq": seq}), web.CodeNotFound)
	refused(t, "replay a discarded dead letter", alice.call(map[string]any{"type": "dead.replay", "req": "x3", "seq": seq}), web.CodeNotFound)

	// A lease that names a node gone from placement: unheld.
	place, err := e.conn.JetStream().KeyValue(ctx, e.conn.Names().PlaceBucket())
	if err != nil {
		t.Fatal(err)
	}
	ghost, err := codec.Marshal(map[string]any{"node": "gone-node", "since": time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := place.Put(ctx, e.conn.Names().LeaseKey("ghost", 3), ghost); err != nil {
		t.Fatal(err)
	}

	// The node view: the one node, every partition of its kinds held by it,
	// the two records counter/alice processed counted, and the index lag.
	parts := e.conn.Names().Partitions()
	var last map[string]any
	actortest.Eventually(t, 30*time.Second, "the node view with counter's partitions processed", func() bool {
		f := ops.call(map[string]any{"type": "nodes", "req": "n1"})
		if f["type"] != "result" {
			t.Fatalf("nodes: %v", f)
		}
		last = f["result"].(map[string]any)
		nodes := last["nodes"].([]any)
		if len(nodes) != 1 || int(num(last["partitions"])) != parts {
			return false
		}
		nd := nodes[0].(map[string]any)
		counter, done := 0, uint64(0)
		for _, p := range nd["partitions"].([]any) {
			p := p.(map[string]any)
			if p["kind"] == "counter" {
				counter++
				done += num(p["done"])
				if p["node"] != nd["id"] || p["error"] != nil {
					t.Fatalf("partition %v of node %v", p, nd["id"])
				}
			}
		}
		_, lagErr := last["index_lag_error"]
		unheld := last["unheld"].([]any)
		if len(unheld) != 1 || unheld[0].(map[string]any)["kind"] != "ghost" || num(unheld[0].(map[string]any)["partition"]) != 3 || unheld[0].(map[string]any)["node"] != "gone-node" {
			t.Fatalf("unheld %v: want ghost/3 of gone-node", unheld)
		}
		return counter == parts && done >= 2 && num(nd["done"]) >= done && !lagErr
	})
	t.Logf("nodes: %v", last)
}

// BenchmarkConsoleNodes measures the node view's request (placement, one
// consumer info per held partition, the index lag) on one node hosting
// three kinds of 64 partitions, against the kinds request (placement's node
// keys only) over the same connection as the baseline, and the part of it
// the record store's IndexLag takes.
func BenchmarkConsoleNodes(b *testing.B) {
	e := newEnv(b, envOpts{})
	c := e.dial(b, nil)
	c.next("welcome", isType("welcome"))
	parts := 3 * e.conn.Names().Partitions()
	actortest.Eventually(b, 30*time.Second, "every partition held", func() bool {
		c.write(map[string]any{"type": "nodes", "req": "w"})
		f := c.reply("w")
		nodes, _ := f["result"].(map[string]any)["nodes"].([]any)
		return len(nodes) == 1 && len(nodes[0].(map[string]any)["partitions"].([]any)) == parts
	})
	b.Run("store.Client.IndexLag", func(b *testing.B) {
		sc, err := store.NewClient(context.Background(), e.conn)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sc.IndexLag(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, typ := range []string{"kinds", "nodes"} {
		name := typ
		if typ == "kinds" {
			name = "baseline=kinds"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c.write(map[string]any{"type": typ, "req": "r"})
				if f := c.reply("r"); f["type"] != "result" {
					b.Fatalf("%s: %v", typ, f)
				}
			}
		})
	}
}
