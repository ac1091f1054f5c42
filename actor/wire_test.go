package actor_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// TestStateEndpoint: ea.ctl.state.<kind> answers the state document as
// JSON, the state decoded from msgpack, to any NATS client.
func TestStateEndpoint(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	ctx := ctxT(t)
	s1 := ref("counter", "s1")
	if _, err := c.Create(ctx, s1, kinds.CounterState{Count: 3}); err != nil {
		t.Fatal(err)
	}
	var last records.Record
	for range 2 {
		var err error
		if last, err = c.Send(ctx, s1, records.Record{Type: "inc", ContentType: records.ContentJSON, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.StateAt(ctx, s1, last.Seq); err != nil {
		t.Fatal(err)
	}
	msg, err := conn.NATS().Request(conn.Names().Control("state", "counter"), []byte(`{"id":"s1"}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("error %s %s", code, msg.Header.Get("Nats-Service-Error"))
	}
	var doc struct {
		ID, Kind, Status string
		State            map[string]any
		Seq              uint64
		Updated          time.Time
	}
	if err := json.Unmarshal(msg.Data, &doc); err != nil {
		t.Fatalf("reply %s: %v", msg.Data, err)
	}
	if doc.ID != "s1" || doc.Kind != "counter" || doc.Status != "IDLE" || doc.Seq != last.Seq || doc.State["count"] != float64(5) || doc.Updated.IsZero() {
		t.Fatalf("state reply %s", msg.Data)
	}
	t.Logf("nats req ea.ctl.state.counter '{\"id\":\"s1\"}' → %s", msg.Data)
}

// TestActivateAheadOfTraffic: Client.Activate loads effectors into the node
// that reads their partition, whichever node the request reaches (the
// others forward it), before any record; their records then find them
// loaded (no second activation).
func TestActivateAheadOfTraffic(t *testing.T) {
	t.Parallel()
	srv, conn := server(t)
	c := newClient(t, conn)
	nodes := []*runningNode{
		startNodeWith(t, srv.Connect(t), fastPlacement, nil, kinds.Counter()),
		startNodeWith(t, srv.Connect(t), fastPlacement, nil, kinds.Counter()),
	}
	actortest.Eventually(t, 20*time.Second, "the partitions are split", func() bool {
		a, b := nodes[0].Reading(), nodes[1].Reading()
		return a > 0 && b > 0 && a+b == conn.Names().Partitions()
	})
	refs := createCounters(t, c, 20)
	activations := func() (per [2]float64, sum float64) {
		for i, n := range nodes {
			per[i] = metricSum(t, n.Registry, "ea_activations_total")
			sum += per[i]
		}
		return per, sum
	}
	if _, sum := activations(); sum != 0 {
		t.Fatalf("%v effectors active before any record or activation", sum)
	}
	for round := range 2 { // activating twice loads once
		for _, r := range refs {
			doc, err := c.Activate(ctxT(t), r)
			if err != nil {
				t.Fatalf("round %d: activate %s: %v", round, r, err)
			}
			if doc.Ref() != r || doc.Status != actor.StatusIdle {
				t.Fatalf("activate %s: document %+v", r, doc)
			}
		}
	}
	per, sum := activations()
	if sum != float64(len(refs)) || per[0] == 0 || per[1] == 0 {
		t.Fatalf("activations per node %v, want %d in all, on both nodes", per, len(refs))
	}
	for _, r := range refs {
		if _, err := c.Send(ctxT(t), r, records.Record{Type: "inc", ContentType: records.ContentJSON, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	waitCounts(t, conn, c, refs, 1, 10*time.Second)
	if _, after := activations(); after != sum {
		t.Fatalf("activations went from %v to %v: records did not find their effectors loaded", sum, after)
	}

	// A node that does not read the partition refuses to load it itself.
	for _, r := range refs {
		for _, n := range nodes {
			msg, err := conn.NATS().Request(conn.Names().NodeControl(n.ID(), "activate", "counter"), []byte(`{"id":"`+r.ID+`"}`), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" && (code != "503" || msg.Header.Get("EA-Error-Reason") != "not_loaded") {
				t.Fatalf("node %s: %s %s", n.ID(), code, msg.Header.Get("Nats-Service-Error"))
			}
		}
	}
}

// TestSendReadsStateOnce: Client.Send reads an effector's state document on
// its first send only (and again after a Terminate or Reset through the
// client), not before every publish.
func TestSendReadsStateOnce(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, kinds.Counter())
	c := newClient(t, conn)
	other := newClient(t, conn)
	ctx := ctxT(t)
	s1 := ref("counter", "s1")
	if _, err := other.Create(ctx, s1, nil); err != nil { // a Create through c would spare it even the first read
		t.Fatal(err)
	}
	// Loaded ahead, so that the node's own read of the document is done.
	if _, err := c.Activate(ctx, s1); err != nil {
		t.Fatal(err)
	}
	// Every read of a state document is a JetStream get on the state
	// bucket's stream; a core subscriber sees the requests.
	var reads atomic.Int64
	for _, subject := range []string{"$JS.API.DIRECT.GET.KV_ea_state.>", "$JS.API.DIRECT.GET.KV_ea_state", "$JS.API.STREAM.MSG.GET.KV_ea_state"} {
		sub, err := conn.NATS().Subscribe(subject, func(*nats.Msg) { reads.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	inc := records.Record{Type: "inc", ContentType: records.ContentJSON, Payload: []byte(`{}`)}
	var last records.Record
	for i := range 50 {
		var err error
		if last, err = c.Send(ctx, s1, inc); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	if got := reads.Load(); got != 1 {
		t.Fatalf("50 sends read the state document %d times, want once", got)
	}
	waitCount(t, conn, c, s1, 50, 10*time.Second)

	// A reply the node would refuse is refused before anything is stored;
	// an inbox is fine.
	for _, reply := range []string{"$KV.ea_state.counter.s1", "$JS.API.STREAM.PURGE.EA_MBOX", "ea.ctl.terminate.counter", "ea.out.counter.other", "ea.dead.counter.s1"} {
		bad := inc
		bad.Reply = reply
		if _, err := c.Send(ctx, s1, bad); !errors.Is(err, actor.ErrForbidden) || !strings.Contains(err.Error(), reply) {
			t.Fatalf("send with EA-Reply %s: %v, want ErrForbidden naming it", reply, err)
		}
	}
	if got := mailboxCount(t, conn, s1); got != 50 {
		t.Fatalf("mailbox holds %d records, want 50", got)
	}

	// Terminated by another client: this one does not know, the record is
	// stored and goes to dead letters (reason terminated), nothing is lost.
	if _, err := other.Terminate(ctx, s1); err != nil {
		t.Fatal(err)
	}
	late, err := c.Send(ctx, s1, inc)
	if err != nil {
		t.Fatalf("send after another client terminated: %v", err)
	}
	dl := waitDead(t, c, s1, 0, 1, "terminated")[0]
	if dl.Seq != late.Seq || late.Seq <= last.Seq {
		t.Fatalf("dead letter of seq %d, want %d", dl.Seq, late.Seq)
	}
	// Terminated through this client: it reads again and refuses.
	if _, err := c.Terminate(ctx, s1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, s1, inc); !errors.Is(err, actor.ErrTerminated) {
		t.Fatalf("send after Terminate: %v, want ErrTerminated", err)
	}
	if _, err := c.Send(ctx, ref("counter", "nobody"), inc); !errors.Is(err, actor.ErrNotFound) {
		t.Fatalf("send to an effector never created: %v, want ErrNotFound", err)
	}
	if got := count(t, c, s1); got != 50 {
		t.Fatalf("count %d, want 50", got)
	}
	fmt.Fprint(testWriter{t}, "50 sends, one state read")
}

// BenchmarkClientSend: Send as it is (the state document read once per
// effector, then one publish per record) against the baseline of reading
// the document before every publish, as Send did before. The node is
// stopped once the effector exists, so that only the client's work is
// measured.
func BenchmarkClientSend(b *testing.B) {
	_, conn := server(b)
	n := startNode(b, conn, nil, kinds.Counter())
	c := newClient(b, conn)
	ctx := ctxT(b)
	s1 := ref("counter", "bench")
	if _, err := c.Create(ctx, s1, nil); err != nil {
		b.Fatal(err)
	}
	n.Stop(b)
	inc := records.Record{Type: "inc", ContentType: records.ContentJSON, Payload: []byte(`{}`)}
	b.Run("read-before-every-publish", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.State(ctx, s1); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Send(ctx, s1, inc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("send", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Send(ctx, s1, inc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
