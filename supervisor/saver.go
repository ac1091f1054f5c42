package supervisor

import (
	"context"
	"fmt"
	"sync"

	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/codec"
)

// recordSaver is the graph.Checkpointer of orchestration graphs. It keeps no
// history of its own: while a change to orchestration <id> runs, it holds
// thread <id>'s head checkpoint in memory (loaded from the orchestration
// record); afterwards the supervisor takes the last checkpoint the graph put
// and writes it into the record with the same compare-and-set as the rest
// of the change, so the graph state, the active tasks and the status never
// disagree. The orchestration record is the thread's only durable copy;
// two supervisors racing on one orchestration are kept apart by that
// compare-and-set, and within one process by the supervisor's per-id lock.
type recordSaver struct {
	mu      sync.Mutex
	threads map[string]*thread
}

type thread struct {
	head    graph.Checkpoint
	version uint64 // 0: no checkpoint
}

var _ graph.Checkpointer = (*recordSaver)(nil)

func newRecordSaver() *recordSaver { return &recordSaver{threads: map[string]*thread{}} }

// load makes cp (msgpack of a graph.Checkpoint; empty for none) the head of
// thread id.
func (r *recordSaver) load(id string, cp []byte) error {
	t := &thread{}
	if len(cp) > 0 {
		if err := codec.Unmarshal(cp, &t.head); err != nil {
			return fmt.Errorf("orchestration %s: decode its graph checkpoint: %w", id, err)
		}
		t.version = 1
		t.head.Version = 1
	}
	r.mu.Lock()
	r.threads[id] = t
	r.mu.Unlock()
	return nil
}

// take removes thread id and returns its head checkpoint, encoded.
func (r *recordSaver) take(id string) ([]byte, error) {
	r.mu.Lock()
	t := r.threads[id]
	delete(r.threads, id)
	r.mu.Unlock()
	if t == nil || t.version == 0 {
		return nil, nil
	}
	return codec.Marshal(t.head)
}

// drop forgets thread id.
func (r *recordSaver) drop(id string) {
	r.mu.Lock()
	delete(r.threads, id)
	r.mu.Unlock()
}

func (r *recordSaver) Put(_ context.Context, cp graph.Checkpoint, head uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.threads[cp.Thread]
	if t == nil {
		return 0, &graph.ConflictError{Thread: cp.Thread, Detail: "orchestration not loaded by this supervisor"}
	}
	if t.version != head {
		return 0, &graph.ConflictError{Thread: cp.Thread, Detail: fmt.Sprintf("head is at version %d, not %d", t.version, head)}
	}
	t.version++
	cp.Version = t.version
	t.head = cp
	return t.version, nil
}

func (r *recordSaver) Get(_ context.Context, id, cpID string) (graph.Checkpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.threads[id]
	if t == nil || t.version == 0 || (cpID != "" && cpID != t.head.ID) {
		return graph.Checkpoint{}, fmt.Errorf("%w: checkpoint %q of orchestration %s (only its latest is kept)", graph.ErrNotFound, cpID, id)
	}
	return t.head, nil
}

func (r *recordSaver) List(_ context.Context, id string, limit int) ([]graph.Checkpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.threads[id]
	if t == nil || t.version == 0 {
		return nil, nil
	}
	return []graph.Checkpoint{t.head}, nil
}

func (r *recordSaver) Delete(_ context.Context, id string) error {
	r.drop(id)
	return nil
}
