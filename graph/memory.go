package graph

import (
	"context"
	"slices"
	"sync"
)

// DefaultRetention is how many checkpoints per thread a checkpointer keeps
// when not told otherwise.
const DefaultRetention = 100

// MemorySaver is a Checkpointer in process memory, for tests and for graphs
// whose runs need not survive the process. It keeps the latest Retention
// checkpoints of each thread. Checkpoints are stored as given (their state
// is already msgpack), so callers cannot alias the stored ones.
type MemorySaver struct {
	retention int
	mu        sync.Mutex
	threads   map[string][]Checkpoint // oldest first
}

var _ Checkpointer = (*MemorySaver)(nil)

// NewMemorySaver returns an empty MemorySaver keeping the latest retention
// checkpoints per thread (DefaultRetention when retention <= 0).
func NewMemorySaver(retention int) *MemorySaver {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &MemorySaver{retention: retention, threads: map[string][]Checkpoint{}}
}

func checkCheckpoint(cp Checkpoint) error {
	if !nameRE.MatchString(cp.Thread) {
		return invalidArg("checkpoint thread id %q: use 1-128 letters, digits, - or _", cp.Thread)
	}
	if cp.Seq == 0 || cp.ID != FormatID(cp.Seq) {
		return invalidArg("checkpoint %q of thread %q: Seq must be at least 1 and ID must be FormatID(Seq)", cp.ID, cp.Thread)
	}
	return nil
}

// Put implements Checkpointer. The version of a checkpoint is its Seq.
func (m *MemorySaver) Put(ctx context.Context, cp Checkpoint, head uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := checkCheckpoint(cp); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cps := m.threads[cp.Thread]
	var cur uint64
	if n := len(cps); n > 0 {
		cur = cps[n-1].Seq
	}
	if cur != head {
		return 0, &ConflictError{Thread: cp.Thread, Detail: "head is at version " + FormatID(cur) + ", writer expected " + FormatID(head)}
	}
	if cp.Seq != cur+1 {
		return 0, invalidArg("checkpoint of thread %q has Seq %d, want %d (one more than the head)", cp.Thread, cp.Seq, cur+1)
	}
	cp = clone(cp)
	cp.Version = cp.Seq
	cps = append(cps, cp)
	if len(cps) > m.retention {
		cps = slices.Clone(cps[len(cps)-m.retention:])
	}
	m.threads[cp.Thread] = cps
	return cp.Version, nil
}

// Get implements Checkpointer.
func (m *MemorySaver) Get(ctx context.Context, thread, id string) (Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cps := m.threads[thread]
	if len(cps) == 0 {
		return Checkpoint{}, notFound(thread, id)
	}
	if id == "" {
		return clone(cps[len(cps)-1]), nil
	}
	for _, cp := range cps {
		if cp.ID == id {
			return clone(cp), nil
		}
	}
	return Checkpoint{}, notFound(thread, id)
}

// List implements Checkpointer.
func (m *MemorySaver) List(ctx context.Context, thread string, limit int) ([]Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, invalidArg("List: negative limit %d", limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cps := m.threads[thread]
	out := make([]Checkpoint, 0, len(cps))
	for i := len(cps) - 1; i >= 0; i-- {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, clone(cps[i]))
	}
	return out, nil
}

// Delete implements Checkpointer.
func (m *MemorySaver) Delete(ctx context.Context, thread string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.threads, thread)
	return nil
}

// clone deep-copies the slices of a checkpoint (byte slices are never
// modified in place, so they are shared).
func clone(cp Checkpoint) Checkpoint {
	cp.Next = slices.Clone(cp.Next)
	cp.Writes = slices.Clone(cp.Writes)
	cp.Interrupts = slices.Clone(cp.Interrupts)
	return cp
}
