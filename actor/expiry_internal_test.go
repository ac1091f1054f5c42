package actor

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// TestNoExpiryWhileOwnHeartbeatLate: another node whose last heartbeat is a
// TTL old is not taken for gone while this node's own heartbeat is late on
// its watch (a beat and a quarter, before it counts itself blind): the watch
// may have stalled, and the bucket is not known to have answered for that
// TTL (DESIGN.md section 6). With its own heartbeat on time, the same node
// is gone. A cluster torture run lost 8 leases to the first case.
func TestNoExpiryWhileOwnHeartbeatLate(t *testing.T) {
	beat, ttl := time.Second, 3*time.Second
	for _, tc := range []struct {
		name    string
		ownLate time.Duration // how long since this node saw its own heartbeat
		alive   bool          // whether the other stays live
	}{
		{"own heartbeat on time", 200 * time.Millisecond, false},
		{"own heartbeat late, not blind yet", beat + beat/4 + 100*time.Millisecond, true},
		{"blind", 2*beat + 100*time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := newMetrics(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: m}
			p := &placement{
				n: n, id: "a", beat: beat, ttl: ttl,
				members: map[string]*member{}, hosts: map[string][]string{}, plain: map[string]bool{},
				kick: make(chan struct{}, 1),
			}
			now := time.Now()
			p.members["a"] = &member{doc: memberDoc{ID: "a", Kinds: []string{"k"}}, seen: now.Add(-tc.ownLate)}
			p.members["b"] = &member{doc: memberDoc{ID: "b", Kinds: []string{"k"}}, seen: now.Add(-ttl - 50*time.Millisecond)}
			p.live = []string{"a", "b"}
			p.refresh(now)
			if got := slices.Contains(p.live, "b"); got != tc.alive {
				t.Fatalf("own heartbeat %s late, other's %s: other live = %v, want %v (live %v)", tc.ownLate, ttl+50*time.Millisecond, got, tc.alive, p.live)
			}
		})
	}
}
