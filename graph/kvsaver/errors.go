package kvsaver

import (
	"fmt"

	"github.com/effectors/effectors/graph"
)

// The saver reports the graph package's errors, so callers match them the
// same way for every checkpointer: graph.ErrNotFound, graph.ErrInvalidArgument,
// *graph.ConflictError (graph.ErrConflict), *graph.TooLargeError
// (graph.ErrTooLarge).

type notFoundError struct{ thread, id string }

func notFound(thread, id string) error { return &notFoundError{thread, id} }

func (e *notFoundError) Error() string {
	if e.id == "" {
		return fmt.Sprintf("kvsaver: thread %q has no checkpoint", e.thread)
	}
	return fmt.Sprintf("kvsaver: thread %q has no checkpoint %q", e.thread, e.id)
}

func (e *notFoundError) Is(target error) bool { return target == graph.ErrNotFound }
