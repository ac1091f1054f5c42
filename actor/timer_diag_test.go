package actor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestDiagSchedules(t *testing.T) {
	_, conn := server(t)
	ctx := ctxT(t)
	js := conn.JS
	due := time.Now().Add(4 * time.Second)
	n := 5000
	var futs []jetstream.PubAckFuture
	for i := 0; i < n; i++ {
		m := nats.NewMsg(fmt.Sprintf("ea.timer.set.k.x%d.t", i%10*0+i))
		m.Header.Set("Nats-Schedule", "@at "+due.UTC().Format(time.RFC3339Nano))
		m.Header.Set("Nats-Schedule-Target", fmt.Sprintf("ea.timer.fire.k.x%d.t", i))
		m.Header.Set("Nats-Schedule-TTL", "168h")
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	t.Logf("published %d by %s before due", n, time.Until(due))
	s, _ := conn.TimerStream(ctx)
	for {
		info, _ := s.Info(ctx, jetstream.WithSubjectFilter("ea.timer.fire.>"))
		var fired uint64
		for _, c := range info.State.Subjects {
			fired += c
		}
		t.Logf("%s after due: fired %d", time.Since(due).Round(time.Millisecond), fired)
		if fired >= uint64(n) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
}
