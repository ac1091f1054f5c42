package kvsaver_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/graphtest"
	"github.com/effectors/effectors/graph/kvsaver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	n := 0
	newSaver := func(t *testing.T) *kvsaver.Saver {
		n++ // a prefix per subtest keeps them apart in one bucket
		s, err := kvsaver.New(ctxT(t), conn, kvsaver.Config{Prefix: fmt.Sprintf("cp%d", n), Retention: graphtest.Retention, PruneEvery: 2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	maxSize := newSaver(t).MaxSize()
	if maxSize < 1000*1000 || maxSize >= 1024*1024 {
		t.Fatalf("MaxSize %d: want just under the default max payload of 1 MiB", maxSize)
	}
	graphtest.Run(t, func(t *testing.T) graph.Checkpointer { return newSaver(t) },
		graphtest.Features{Retention: graphtest.Retention, PruneSlack: 1, MaxSize: maxSize})
}
