//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestTimersAcrossNodeKill runs two ea-node processes, sets 1,000 timers
// on ten counters through the timer-set control endpoint (each an inc by 1,
// due 2 to 7 seconds later), kills one node with SIGKILL while they fire and
// starts another in its place. Every counter ends at exactly 100, every
// counter's mailbox holds each timer's record exactly once, and no timer
// reaches its mailbox later than the lease TTL plus 3 s after it was due
// (those the killed node had in hand are handed over after the forward
// consumer's ack wait, the TTL).
func TestTimersAcrossNodeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	const counters, per = 10, 100
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := bustest.NewServer(t)
	nc, js := plainClient(t, srv.URL)
	start := func(id string) *process {
		metrics := proctest.FreeAddr(t)
		p := startNode(t, id, metrics, append([]string{"--nats", srv.URL, "--metrics", metrics, "--node-id", id}, chaosNodeArgs...)...)
		p.waitReady(t, 60*time.Second)
		return p
	}
	victim := start("n1")
	start("n2")
	for i := range counters {
		createEffector(t, nc, "ea", "counter", fmt.Sprint("c", i))
	}
	due := make([]time.Time, counters*per)
	for i := range counters * per {
		due[i] = time.Now().Add(time.Duration(2000+i*5) * time.Millisecond)
		body, _ := json.Marshal(map[string]any{
			"id": fmt.Sprint("c", i%counters), "name": fmt.Sprint("t", i),
			"after": fmt.Sprintf("%dms", 2000+i*5), "type": "inc", "payload": map[string]int{"by": 1},
		})
		msg, err := nc.Request("ea.ctl.timer-set.counter", body, 10*time.Second)
		if err != nil {
			t.Fatalf("set timer %d: %v", i, err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Fatalf("set timer %d: error %s: %s", i, code, msg.Header.Get("Nats-Service-Error"))
		}
	}
	_, bucket := outboxAndState(t, ctx, js)
	total := func() int64 {
		var sum int64
		for i := range counters {
			d, err := proctest.ReadState(ctx, bucket, fmt.Sprint("counter.c", i))
			if err == nil {
				sum += d.Count()
			}
		}
		return sum
	}
	eventually(t, 60*time.Second, "the first timers fire", func() bool { return total() > 0 })
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	at := total()
	start("n3")
	eventually(t, 3*time.Minute, "every timer fires", func() bool { return total() >= counters*per })
	t.Logf("%d of %d timers had fired at the kill; all fired %s after it", at, counters*per, time.Since(killed).Round(time.Millisecond))
	mbox, err := js.Stream(ctx, "EA_MBOX")
	if err != nil {
		t.Fatal(err)
	}
	var latest time.Duration // the latest a timer reached its mailbox after it was due
	latestName := ""
	for i := range counters {
		d, err := proctest.ReadState(ctx, bucket, fmt.Sprint("counter.c", i))
		if err != nil {
			t.Fatal(err)
		}
		if d.Count() != per {
			t.Errorf("counter c%d = %d, want %d", i, d.Count(), per)
		}
		seen := map[string]int{}
		cons, err := mbox.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{fmt.Sprintf("ea.mbox.*.counter.c%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		for {
			batch, err := cons.FetchNoWait(500)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				if name := m.Headers().Get("EA-Timer"); name != "" {
					seen[name]++
					var j int
					meta, err := m.Metadata()
					if _, serr := fmt.Sscanf(name, "t%d", &j); err == nil && serr == nil && j >= 0 && j < len(due) {
						if late := meta.Timestamp.Sub(due[j]); late > latest {
							latest, latestName = late, name
						}
					}
				}
			}
			if n == 0 {
				break
			}
		}
		for j := i; j < counters*per; j += counters {
			if name := fmt.Sprint("t", j); seen[name] != 1 {
				t.Errorf("timer %s of c%d: %d records in the mailbox, want 1", name, i, seen[name])
			}
		}
	}
	ttl := 2 * time.Second // chaosNodeArgs' --heartbeat-ttl
	t.Logf("the latest timer (%s) reached its mailbox %s after it was due", latestName, latest.Round(time.Millisecond))
	if latest > ttl+3*time.Second {
		t.Errorf("timer %s reached its mailbox %s after it was due, want within the lease TTL + 3s = %s", latestName, latest.Round(time.Millisecond), ttl+3*time.Second)
	}
}
