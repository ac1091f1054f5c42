package actor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/examples/kinds"
)

// TestScrapeDuringStart gathers the node's metrics without pause while Run
// starts, as a Prometheus scrape of ea-node's /metrics (served before Run)
// may: under -race this caught Run setting the placement the collector
// reads.
func TestScrapeDuringStart(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	reg := prometheus.NewRegistry()
	n, err := actor.NewNode(conn, actor.Options{Registerer: reg, ShutdownGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Host(kinds.Counter()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	scrapes := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Errorf("gather: %v", err)
				return
			}
			scrapes++
		}
	})
	actortest.Run(t, n) // returns once the node is ready
	close(stop)
	wg.Wait()
	if scrapes == 0 {
		t.Fatal("no scrape happened while the node started")
	}
}
