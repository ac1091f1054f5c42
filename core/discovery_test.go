package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
)

func TestServePipelines(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	reg := func(names ...string) *core.Pipelines {
		ps := core.NewPipelines()
		for _, n := range names {
			p, err := core.NewPipeline(n, "does "+n, func(_ context.Context, in string) (string, error) {
				if in == "" {
					return "", errors.New("empty input")
				}
				return strings.ToUpper(in) + "@" + n, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.Register(p); err != nil {
				t.Fatal(err)
			}
		}
		return ps
	}
	if _, err := core.ServePipelines(ctx, conn.NATS(), "ea", "node-a", reg("upper", "shout")); err != nil {
		t.Fatal(err)
	}
	svcB, err := core.ServePipelines(ctx, srv.Connect(t).NATS(), "ea", "node-b", reg("upper"))
	if err != nil {
		t.Fatal(err)
	}

	lctx, lcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer lcancel()
	nodes, err := core.ListPipelines(lctx, conn.NATS(), "ea")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Node != "node-a" || nodes[1].Node != "node-b" ||
		len(nodes[0].Pipelines) != 2 || len(nodes[1].Pipelines) != 1 || nodes[1].Pipelines[0] != (core.PipelineInfo{Name: "upper", Description: "does upper"}) {
		t.Fatalf("nodes = %+v", nodes)
	}

	var out string
	if err := core.CallPipeline(ctx, conn.NATS(), "ea", "shout", "hi", &out); err != nil || out != "HI@shout" {
		t.Fatalf("out %q err %v", out, err)
	}
	if err := core.CallPipeline(ctx, conn.NATS(), "ea", "shout", "", &out); !errors.Is(err, core.ErrFailed) || !strings.Contains(err.Error(), "empty input") {
		t.Fatalf("remote failure: %v", err)
	}
	if err := core.CallPipeline(ctx, conn.NATS(), "ea", "shout", 5, &out); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("bad input: %v", err)
	}
	if err := core.CallPipeline(ctx, conn.NATS(), "ea", "missing", "x", &out); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := core.ServePipelines(ctx, conn.NATS(), "ea", "bad node", core.NewPipelines()); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("bad node name: %v", err)
	}
	if err := svcB.Stop(); err != nil {
		t.Fatal(err)
	}
}
