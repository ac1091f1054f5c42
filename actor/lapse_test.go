package actor_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// answerKind answers every record on its reply subject with the name of
// the node that applied it. On the node whose gate is not nil, logic waits
// for the gate before answering a record of type "hold" (and says so on
// entered).
func answerKind(node string, entered chan<- struct{}, gate <-chan struct{}) actor.Kind[int] {
	return actor.Kind[int]{
		Name: "answer",
		Logic: func(ctx *actor.Context, n int) (int, error) {
			if gate != nil && ctx.Record().Type == "hold" {
				entered <- struct{}{}
				<-gate
			}
			return n + 1, ctx.Reply("answer", map[string]string{"node": node})
		},
	}
}

// TestResumedNodePublishesNothingStale: a node frozen (its connection held
// by a proxy) past the lease TTL with a record in hand must not publish
// that record's outputs when it resumes: the other node has applied the
// record meanwhile, on the state the frozen node had cached, and outputs to
// plain NATS subjects (a reply here) have no duplicate window to drop a
// second copy; outputs to mailboxes would have theirs only for two minutes.
// The resumed node finds its heartbeat lapsed, reads its partitions again
// from their ack floors, and the record counts once, answered once.
func TestResumedNodePublishesNothingStale(t *testing.T) {
	const beat, ttl = 250 * time.Millisecond, 1500 * time.Millisecond
	opts := actor.Options{Heartbeat: beat, HeartbeatTTL: ttl, ReplySubjects: []string{"replies.>"}}
	cfg := bus.Config{Partitions: 4}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, cfg)
	c := newClient(t, conn)
	proxy := proctest.StartNATSProxy(t, strings.TrimPrefix(srv.URL, "nats://"))
	entered, gate := make(chan struct{}, 1), make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	defer open()
	frozen := startNodeWith(t, connectVia(t, proxy.URL(), cfg), opts, nil, answerKind("frozen", entered, gate))
	other := startNodeWith(t, srv.Connect(t, cfg), opts, nil, answerKind("other", nil, nil))
	leases := watchLeases(t, conn)
	actortest.Eventually(t, 20*time.Second, "both nodes read partitions", func() bool {
		return frozen.Reading() > 0 && other.Reading() > 0 && len(leases.holders()) == conn.Names().Partitions()
	})
	var r records.Ref
	held := leases.holders()
	for i := 0; r.ID == ""; i++ {
		cand := records.Ref{Kind: "answer", ID: "a" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		if held[conn.Names().LeaseKey(cand.Kind, conn.Names().Partition(cand))] == frozen.Node.ID() {
			r = cand
		}
	}
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var answers []string
	sub, err := conn.NATS().Subscribe("replies.>", func(m *nats.Msg) {
		mu.Lock()
		answers = append(answers, string(m.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), answers...)
	}

	rawPublish(t, conn, r, map[string]string{"EA-Type": "hold", "EA-Reply": "replies.x", "Content-Type": records.ContentJSON}, []byte(`{}`))
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the node to freeze never took the record")
	}
	proxy.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			proxy.Thaw()
		}
	}()
	actortest.Eventually(t, 3*ttl+10*time.Second, "the other node answers the record", func() bool { return len(got()) > 0 })
	// The frozen node's logic returns with its answer while it is still
	// cut off; then it resumes.
	open()
	proxy.Thaw()
	thawed = true
	actortest.Eventually(t, 10*time.Second, "the resumed node sees its heartbeat lapsed", func() bool {
		return metricSum(t, frozen.Registry, "ea_lease_lapses_total") >= 1
	})
	// Anything the resumed node published before its next heartbeat was
	// acknowledged reached the server before that acknowledgement: a flush
	// of the test's own connection now delivers it.
	if err := conn.NATS().Flush(); err != nil {
		t.Fatal(err)
	}
	if a := got(); len(a) != 1 || !strings.Contains(a[0], "other") {
		t.Fatalf("answers %q: want one, from the other node", a)
	}
	actortest.Eventually(t, 10*time.Second, "the record applied once", func() bool {
		doc, err := c.State(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := doc.Decode(&n); err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Fatalf("%s applied %d records, sent one", r, n)
		}
		return n == 1 && doc.Status == actor.StatusIdle
	})
}
