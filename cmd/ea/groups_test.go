package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

// TestTopStreamGroups: on a deployment with stream groups ea top counts a
// kind's records in every group's mailbox stream and its backlog over the
// partition consumers of every group, without being told the layout.
func TestTopStreamGroups(t *testing.T) {
	srv := bustest.NewServer(t)
	srv.MapPartitions(t, 8)
	cfg := bus.Config{Partitions: 8, Groups: 2}
	conn := srv.Connect(t, cfg)
	log := slog.New(slog.DiscardHandler)
	actortest.StartNode(t, srv.Connect(t, cfg), actor.Options{Logger: log}, kinds.Counter())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	runStore(t, ctx, &wg, conn, log)
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[int]bool{}
	sent := 0
	for i := 0; i < 4 || len(groups) < 2; i++ {
		if i == 32 {
			t.Fatalf("32 counters all in group(s) %v", groups)
		}
		ref := records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
		actortest.Create(t, c, ref, nil)
		rec, err := records.New("inc", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, ref, rec); err != nil {
			t.Fatal(err)
		}
		groups[conn.Names().GroupOf(ref)] = true
		sent++
	}
	w := &world{url: srv.URL}
	var frame topFrame
	actortest.Eventually(t, 20*time.Second, fmt.Sprintf("top --once shows counter's %d records, no backlog", sent), func() bool {
		r := w.ea(t, "", "top", "--once", "--interval", "100ms", "--json", "--kind", "counter").ok(t, "top --once --json")
		frame = topFrame{}
		if err := json.Unmarshal([]byte(r.out), &frame); err != nil {
			t.Fatalf("top --json: %v: %q", err, r.out)
		}
		return len(frame.Kinds) == 1 && frame.Kinds[0].Records == uint64(sent) && frame.Kinds[0].Nodes == 1 && frame.Kinds[0].Backlog == 0
	})
}
