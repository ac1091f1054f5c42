package actor_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
)

// TestStallIsVisible: an effector whose logic does not finish while
// records wait behind it counts in ea_effectors_stalled after StallAfter,
// with a warning naming it, its partition and the partition consumer's
// state; once it moves again the gauge falls back to 0 and the log says so.
func TestStallIsVisible(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	release := make(chan struct{})
	stuck := actor.Kind[kinds.CounterState]{
		Name: "stuck",
		Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return s, ctx.Err()
			}
			s.Count++
			return s, nil
		},
	}
	var logs proctest.Buffer
	opts := actor.Options{StallAfter: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	node := startNodeWith(t, conn, opts, nil, stuck)
	c := newClient(t, conn)
	r := ref("stuck", "s1")
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	if got := metricSum(t, node.Registry, "ea_effectors_stalled", "kind", "stuck"); got != 0 {
		t.Fatalf("ea_effectors_stalled = %v before any record, want 0", got)
	}
	publishIncs(t, conn, r, 3)
	actortest.Eventually(t, 15*time.Second, "ea_effectors_stalled 1", func() bool {
		return metricSum(t, node.Registry, "ea_effectors_stalled", "kind", "stuck") == 1
	})
	warn := grepLine(logs.String(), "effector stalled")
	for _, want := range []string{"effector=stuck/s1", "partition=stuck/", "held=", "consumer=\"stuck~p", "waiting for acks 3", "pending", "pull requests"} {
		if !strings.Contains(warn, want) {
			t.Errorf("stall warning %q lacks %q", warn, want)
		}
	}
	close(release)
	waitCountSaid(t, conn, c, r, 3, nil, 15*time.Second) // stuck emits nothing
	actortest.Eventually(t, 15*time.Second, "ea_effectors_stalled back to 0", func() bool {
		return metricSum(t, node.Registry, "ea_effectors_stalled", "kind", "stuck") == 0
	})
	if !strings.Contains(logs.String(), "effector moving again after a stall") {
		t.Error("no log line says the effector moves again")
	}
}

// grepLine returns the first line of s that contains sub.
func grepLine(s, sub string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// TestLogicLoggerNamesEffectorAndRecord: Context.Logger (built only when
// logic asks for it) carries the node's logger's attributes, the effector
// and the record in hand.
func TestLogicLoggerNamesEffectorAndRecord(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	talker := actor.Kind[kinds.CounterState]{
		Name: "talker",
		Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
			ctx.Logger().Info("logic speaks")
			s.Count++
			return s, nil
		},
	}
	var logs proctest.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil)).With("node_attr", "kept")
	startNodeWith(t, conn, actor.Options{Logger: logger}, nil, talker)
	c := newClient(t, conn)
	r := ref("talker", "t1")
	if _, err := c.Create(ctxT(t), r, nil); err != nil {
		t.Fatal(err)
	}
	in, err := records.New("inc", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Send(ctxT(t), r, in)
	if err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 15*time.Second, "the logic's log line", func() bool {
		return grepLine(logs.String(), "logic speaks") != ""
	})
	line := grepLine(logs.String(), "logic speaks")
	for _, want := range []string{"node_attr=kept", "effector=talker/t1", "record=" + rec.ID} {
		if !strings.Contains(line, want) {
			t.Errorf("logic's log line %q lacks %q", line, want)
		}
	}
}
