package actor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
)

// ledger sums what "add" records add and keeps a chain over them in the
// order applied (so a replay in another order differs); "bad" records are
// refused (dead letters at once) and "flaky" ones fail one attempt in two,
// so they are applied on a retry (by a replay too).
type ledger struct {
	Total int    `json:"total"`
	Count int    `json:"count"`
	Chain uint64 `json:"chain"`
}

type add struct {
	By int `json:"by"`
}

func ledgerKind() actor.Kind[ledger] {
	var mu sync.Mutex
	tries := map[string]int{}
	return actor.Kind[ledger]{
		Name:  "ledger",
		Retry: actor.RetryPolicy{Attempts: 3, Backoff: time.Millisecond},
		Logic: func(ctx *actor.Context, s ledger) (ledger, error) {
			var in add
			if err := ctx.Decode(&in); err != nil {
				return s, err
			}
			switch ctx.Record().Type {
			case "bad":
				return s, actor.Permanent(errors.New("bad record"))
			case "flaky":
				mu.Lock()
				n := tries[ctx.Record().ID]
				tries[ctx.Record().ID]++
				mu.Unlock()
				if n%2 == 0 { // every first attempt, replays included
					return s, errors.New("flaky: try again")
				}
			}
			if err := ctx.Emit("added", in); err != nil {
				return s, err
			}
			s.Total += in.By
			s.Count++
			s.Chain = s.Chain*1099511628211 + uint64(in.By) + 1
			return s, nil
		},
	}
}

// TestReplay: after concurrent sends (with refused and retried records,
// and crashes of the node between publishing outputs and writing the
// state), replaying each effector's log gives its stored state; an
// effector created with a state of its own replays from it while the
// document's history still shows the create, and from a state given in
// the request after; a tampered document is reported with its first
// difference.
func TestReplay(t *testing.T) {
	_, conn := server(t)
	var crashMu sync.Mutex
	crashed := map[uint64]bool{}
	node := startNode(t, conn, func(n *actor.Node) {
		n.SetCrash(func(point actor.CrashPoint, r records.Ref, seq uint64) bool {
			crashMu.Lock()
			defer crashMu.Unlock()
			if seq%37 != 0 || crashed[seq] {
				return false
			}
			crashed[seq] = true
			return true
		})
	}, ledgerKind())
	c := newClient(t, conn)
	ctx := ctxT(t)
	plain, seeded := ref("ledger", "plain"), ref("ledger", "seeded")
	if _, err := c.Create(ctx, plain, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, seeded, ledger{Total: 1000}); err != nil {
		t.Fatal(err)
	}

	// Early: the seeded document's history still holds the create.
	send := func(r records.Ref, typ string, by int) {
		t.Helper()
		rec, err := records.New(typ, add{By: by})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, r, rec); err != nil {
			t.Fatal(err)
		}
	}
	send(seeded, "add", 1)
	actortest.Eventually(t, 30*time.Second, "first record applied", func() bool {
		d, err := c.State(ctx, seeded)
		return err == nil && d.Seq > 0
	})
	rep, err := c.Replay(ctx, seeded)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal || rep.From != actor.ReplayFromCreated || rep.Applied != 1 {
		t.Fatalf("early replay: %+v", rep)
	}

	const senders, each = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		r := []records.Ref{plain, seeded}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				typ := "add"
				switch i % 10 {
				case 3:
					typ = "bad"
				case 7:
					typ = "flaky"
				}
				rec, err := records.New(typ, add{By: g*100 + i})
				if err != nil {
					errs <- err
					return
				}
				if _, err := c.Send(ctx, r, rec); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every record handled: counts of applied ("add" and "flaky") records.
	perRef := senders / 2 * each * 9 / 10
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(node.Debug())
			for _, r := range []records.Ref{plain, seeded} {
				d, err := c.State(context.Background(), r)
				t.Logf("%s: seq %d ahead %v status %s state %s err %v", r, d.Seq, d.Ahead, d.Status, d.State, err)
			}
		}
	})
	actortest.Eventually(t, 60*time.Second, "all records applied", func() bool {
		for r, extra := range map[records.Ref]int{plain: 0, seeded: 1} {
			d, err := c.State(ctx, r)
			if err != nil {
				return false
			}
			var s ledger
			if d.Decode(&s) != nil || s.Count != perRef+extra || d.Status == actor.StatusProcessing {
				return false
			}
		}
		return true
	})
	crashMu.Lock()
	nCrashes := len(crashed)
	crashMu.Unlock()
	if nCrashes == 0 {
		t.Fatal("no crash injected")
	}

	rep, err = c.Replay(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal || rep.Applied != perRef || rep.Skipped != senders/2*each/10 || rep.From != actor.ReplayFromInitial {
		t.Fatalf("replay of %s: %+v", plain, rep)
	}
	// seeded: the create has left the history (5 revisions kept), so the
	// replay starts from the kind's Initial and misses the 1000 it was
	// created with; given the state, it is equal.
	rep, err = c.Replay(ctx, seeded)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Equal || rep.From != actor.ReplayFromInitial || !strings.Contains(rep.Difference, "state.total") {
		t.Fatalf("replay of %s from the initial state: %+v", seeded, rep)
	}
	rep, err = c.Replay(ctx, seeded, actor.ReplayFrom(json.RawMessage(`{"total": 1000}`)))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal || rep.From != actor.ReplayFromGiven || rep.Applied != perRef+1 {
		t.Fatalf("replay of %s from the given state: %+v", seeded, rep)
	}

	// Tampered: the stored total is changed behind the runtime's back.
	kvb, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := conn.Names().StateKey(plain)
	ent, err := kvb.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var doc actor.Document
	if err := codec.Unmarshal(ent.Value(), &doc); err != nil {
		t.Fatal(err)
	}
	var s ledger
	if err := doc.Decode(&s); err != nil {
		t.Fatal(err)
	}
	s.Total++
	if doc.State, err = codec.Marshal(s); err != nil {
		t.Fatal(err)
	}
	b, err := codec.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvb.Update(ctx, key, b, ent.Revision()); err != nil {
		t.Fatal(err)
	}
	rep, err = c.Replay(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	wantDiff := fmt.Sprintf("state.total: stored %d, replayed %d", s.Total, s.Total-1)
	if rep.Equal || rep.Difference != wantDiff {
		t.Fatalf("tampered: %+v, want difference %q", rep, wantDiff)
	}

	// Errors: unknown effector, kind no node hosts.
	if _, err := c.Replay(ctx, ref("ledger", "nobody")); !errors.Is(err, actor.ErrNotFound) {
		t.Fatalf("unknown effector: %v", err)
	}
	if _, err := c.Replay(ctx, ref("nokind", "x")); !errors.Is(err, actor.ErrNoHost) {
		t.Fatalf("kind not hosted: %v", err)
	}
}

// TestReplayAfterFailover: two nodes, one of which freezes (its
// connection held, as a stopped process or a cut network) for three lease
// TTLs while records flow to every counter; the other takes its partitions
// over. Once every count is exact, replaying each counter's log gives its
// stored state.
func TestReplayAfterFailover(t *testing.T) {
	const beat, ttl = 250 * time.Millisecond, 1500 * time.Millisecond
	opts := actor.Options{Heartbeat: beat, HeartbeatTTL: ttl}
	cfg := bus.Config{Partitions: 8}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, cfg)
	c := newClient(t, conn)
	proxy := proctest.StartNATSProxy(t, strings.TrimPrefix(srv.URL, "nats://"))
	frozen := startNodeWith(t, connectVia(t, proxy.URL(), cfg), opts, nil)
	other := startNodeWith(t, srv.Connect(t, cfg), opts, nil)
	actortest.Eventually(t, 30*time.Second, "both nodes read partitions", func() bool {
		return frozen.Reading() > 0 && other.Reading() > 0
	})
	leases := watchLeases(t, conn)
	refs := createCounters(t, c, 12)
	publishAll(t, conn, refs, 5)
	for _, r := range refs {
		waitCount(t, conn, c, r, 5, 30*time.Second)
	}
	hostages := 0
	for _, r := range refs {
		if leases.holders()[conn.Names().LeaseKey(r.Kind, conn.Names().Partition(r))] == frozen.Node.ID() {
			hostages++
		}
	}
	if hostages == 0 {
		t.Fatal("the node to freeze reads no counter's partition: the test proves nothing")
	}
	var once sync.Once
	thaw := func() { once.Do(proxy.Thaw) }
	t.Cleanup(thaw)
	proxy.Freeze()
	frozeAt := time.Now()
	for time.Since(frozeAt) < 3*ttl {
		publishAll(t, conn, refs, 1)
	}
	thaw()
	var total int64
	want := int(mailboxCount(t, conn, refs[0]))
	for _, r := range refs {
		if n := int(mailboxCount(t, conn, r)); n != want {
			t.Fatalf("%s has %d records in its mailbox, %s %d", r, n, refs[0], want)
		}
		waitCount(t, conn, c, r, int64(want), time.Minute)
		total += int64(want)
	}
	for _, r := range refs {
		rep, err := c.Replay(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Equal || rep.Applied != want {
			t.Fatalf("replay of %s after the failover: %+v", r, rep)
		}
	}
	t.Logf("%d counters (%d on the frozen node), %d records, replayed equal after a node froze for %s", len(refs), hostages, total, 3*ttl)
}
