package graph_test

import (
	"testing"

	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/graphtest"
)

func TestMemorySaverConformance(t *testing.T) {
	graphtest.Run(t, func(t *testing.T) graph.Checkpointer {
		return graph.NewMemorySaver(graphtest.Retention)
	}, graphtest.Features{Retention: graphtest.Retention})
}

func TestMemoryStoreConformance(t *testing.T) {
	graphtest.RunStore(t, func(t *testing.T, embed graph.Embedder) graph.Store { return graph.NewMemoryStore(embed) })
}
