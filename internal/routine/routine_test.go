package routine_test

import (
	"maps"
	"testing"

	"github.com/effectors/effectors/internal/routine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGroupRecordsAndWaits: Running names what runs, Wait returns once all
// returned, and nothing is left behind.
func TestGroupRecordsAndWaits(t *testing.T) {
	var g routine.Group
	if len(g.Running()) != 0 {
		t.Fatalf("a new group runs %v", g.Running())
	}
	stop := make(chan struct{})
	started := make(chan struct{}, 3)
	for _, name := range []string{"a", "a", "b"} {
		g.Go(name, func() { started <- struct{}{}; <-stop })
	}
	for range 3 {
		<-started
	}
	if got, want := g.Running(), map[string]int{"a": 2, "b": 1}; !maps.Equal(got, want) {
		t.Fatalf("running %v, want %v", got, want)
	}
	close(stop)
	g.Wait()
	if len(g.Running()) != 0 {
		t.Fatalf("after Wait, running %v", g.Running())
	}
}
