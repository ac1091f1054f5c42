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
