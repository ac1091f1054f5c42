package web_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/web"
)

// sendFrame is a send of a record with a client-chosen id and payload
// {"by":by} to ref.
func sendFrame(req string, ref records.Ref, id string, by int) map[string]any {
	return map[string]any{"type": "send", "req": req, "to": ref.String(),
		"record": map[string]any{"id": id, "type": "inc", "payload": map[string]any{"by": by}}}
}

// checkAck fails unless ack is an ack of id whose seq holds, in the mailbox
// stream, a message with that id on ref's mailbox: an acknowledgement means
// stored, on the subject the client sent to.
func checkAck(t *testing.T, e *env, ref records.Ref, id string, ack map[string]any) {
	t.Helper()
	ctx := context.Background()
	n := e.conn.Names()
	if ack["type"] != "ack" || ack["id"] != id || ack["stream"] != n.MailboxStream() || num(ack["seq"]) == 0 {
		t.Fatalf("send of %s to %s: %v, want an ack", id, ref, ack)
	}
	stream, err := e.conn.JetStream().Stream(ctx, n.MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, num(ack["seq"]))
	if err != nil {
		t.Fatalf("ack of %s to %s at seq %v: %v", id, ref, ack["seq"], err)
	}
	if msg.Subject != n.StoredMailbox(ref) || msg.Header.Get(records.HeaderID) != id {
		t.Fatalf("ack of %s to %s (duplicate %v) at seq %d: the stream holds %s on %s there: acknowledged a record that was not stored",
			id, ref, ack["duplicate"], msg.Sequence, msg.Header.Get(records.HeaderID), msg.Subject)
	}
}

// stored returns how many messages the mailbox stream holds for ref.
func (e *env) stored(t *testing.T, ref records.Ref) uint64 {
	t.Helper()
	ctx := context.Background()
	n := e.conn.Names()
	stream, err := e.conn.JetStream().Stream(ctx, n.MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(n.StoredMailbox(ref)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[n.StoredMailbox(ref)]
}

// TestSendRacingSameID sends the same new id from two clients at the same
// moment, round after round. To two effectors: one send is stored and
// acknowledged, the other refused with conflict, never acknowledged. To
// the same effector: one is stored, the other acknowledged as its
// duplicate.
func TestSendRacingSameID(t *testing.T) {
	const rounds = 40
	e := newEnv(t, envOpts{})
	a, b := e.create(t, "race-a"), e.create(t, "race-b")
	ca, cb := e.dial(t, nil), e.dial(t, nil)
	ca.next("welcome", isType("welcome"))
	cb.next("welcome", isType("welcome"))

	t.Run("TwoEffectors", func(t *testing.T) {
		wins := map[string]int{}
		for i := range rounds {
			id := fmt.Sprintf("race-two-%d", i)
			req := fmt.Sprint("r", i)
			first, second := ca, cb
			if i%2 == 1 {
				first, second = cb, ca
			}
			// Back to back: the gateway serves the two connections
			// concurrently.
			first.write(sendFrame(req, refOf(first, ca, a, b), id, 1))
			second.write(sendFrame(req, refOf(second, ca, a, b), id, 1))
			ra, rb := ca.reply(req), cb.reply(req)
			acked := 0
			for _, r := range []struct {
				ref   records.Ref
				reply map[string]any
			}{{a, ra}, {b, rb}} {
				switch r.reply["type"] {
				case "ack":
					checkAck(t, e, r.ref, id, r.reply)
					if r.reply["duplicate"] == true {
						t.Fatalf("round %d: %s acknowledged as a duplicate of a record it never sent: %v", i, r.ref, r.reply)
					}
					acked++
					wins[r.ref.ID]++
				case "error":
					if r.reply["code"] != web.CodeConflict {
						t.Fatalf("round %d: %s refused with %v, want %s", i, r.ref, r.reply, web.CodeConflict)
					}
				default:
					t.Fatalf("round %d: %s got %v", i, r.ref, r.reply)
				}
			}
			if acked != 1 {
				t.Fatalf("round %d: %d of the two sends acknowledged, want exactly 1 (%v, %v)", i, acked, ra, rb)
			}
		}
		if got := e.stored(t, a) + e.stored(t, b); got != rounds {
			t.Fatalf("the two mailboxes hold %d records after %d rounds, want one per round", got, rounds)
		}
		t.Logf("%d rounds: stored for %v; the other send refused with conflict each time", rounds, wins)
	})

	t.Run("SameEffector", func(t *testing.T) {
		before := e.stored(t, a)
		for i := range rounds {
			id := fmt.Sprintf("race-same-%d", i)
			req := fmt.Sprint("s", i)
			ca.write(sendFrame(req, a, id, 1))
			cb.write(sendFrame(req, a, id, 1))
			ra, rb := ca.reply(req), cb.reply(req)
			checkAck(t, e, a, id, ra)
			checkAck(t, e, a, id, rb)
			if num(ra["seq"]) != num(rb["seq"]) || (ra["duplicate"] == true) == (rb["duplicate"] == true) {
				t.Fatalf("round %d: acks %v and %v, want one stored and one duplicate of it", i, ra, rb)
			}
		}
		if got := e.stored(t, a) - before; got != rounds {
			t.Fatalf("the mailbox got %d records in %d rounds, want one per round", got, rounds)
		}
	})
}

func refOf(c, ca *client, a, b records.Ref) records.Ref {
	if c == ca {
		return a
	}
	return b
}

// TestSendSameIDAfterAck sends an id to one effector and, as soon as it is
// acknowledged, the same id to another: the record store's index may not
// have it yet (with no indexer it never does), and the second send must be
// refused with conflict, not acknowledged as a duplicate of the first. A
// re-send to the first effector is still its duplicate; the id with
// another payload is a conflict.
func TestSendSameIDAfterAck(t *testing.T) {
	const rounds = 20
	for _, tc := range []struct {
		name string
		opts envOpts
	}{
		{"IndexerRunning", envOpts{}},
		{"NoIndexer", envOpts{noIndexer: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			a, b := e.create(t, "seq-a"), e.create(t, "seq-b")
			c := e.dial(t, nil)
			c.next("welcome", isType("welcome"))
			for i := range rounds {
				id := fmt.Sprintf("seq-%d", i)
				c.write(sendFrame(fmt.Sprint("a", i), a, id, 1))
				first := c.reply(fmt.Sprint("a", i))
				checkAck(t, e, a, id, first)
				if first["duplicate"] == true {
					t.Fatalf("round %d: first send of %s acknowledged as a duplicate: %v", i, id, first)
				}
				c.write(sendFrame(fmt.Sprint("b", i), b, id, 1))
				if f := c.reply(fmt.Sprint("b", i)); f["type"] != "error" || f["code"] != web.CodeConflict {
					t.Fatalf("round %d: the same id to %s right after its ack to %s: %v, want error %s", i, b, a, f, web.CodeConflict)
				}
				c.write(sendFrame(fmt.Sprint("r", i), a, id, 1))
				again := c.reply(fmt.Sprint("r", i))
				checkAck(t, e, a, id, again)
				if again["duplicate"] != true || num(again["seq"]) != num(first["seq"]) {
					t.Fatalf("round %d: re-send to %s: %v, want a duplicate at %v", i, a, again, first["seq"])
				}
				c.write(sendFrame(fmt.Sprint("p", i), a, id, 2))
				if f := c.reply(fmt.Sprint("p", i)); f["type"] != "error" || f["code"] != web.CodeConflict {
					t.Fatalf("round %d: the same id to %s with another payload: %v, want error %s", i, a, f, web.CodeConflict)
				}
			}
			// A re-send whose JSON is written otherwise (spacing, key
			// order) is the same record.
			c.write([]byte(`{"type":"send","req":"j1","to":"counter/seq-a","record":{"id":"seq-json","type":"inc","payload":{"by":1,"note":["x",2.5]}}}`))
			first := c.reply("j1")
			checkAck(t, e, a, "seq-json", first)
			c.write([]byte(`{"type":"send","req":"j2","to":"counter/seq-a","record":{"id":"seq-json","type":"inc","payload":{ "note": [ "x", 2.5 ], "by": 1 }}}`))
			if again := c.reply("j2"); again["type"] != "ack" || again["duplicate"] != true || num(again["seq"]) != num(first["seq"]) {
				t.Fatalf("re-send with the JSON written otherwise: %v, want a duplicate at %v", again, first["seq"])
			}
			if na, nb := e.stored(t, a), e.stored(t, b); na != rounds+1 || nb != 0 {
				t.Fatalf("mailboxes hold %d (%s) and %d (%s), want %d and 0", na, a, nb, b, rounds+1)
			}
			if n := e.metric(t, "ea_gateway_sends_total", "outcome", "refused"); n != 2*rounds {
				t.Fatalf("refused sends counted %v, want %d", n, 2*rounds)
			}
		})
	}
}
