package bench

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// BenchmarkNeighbours measures the throughput of 50 effectors that share a
// mailbox partition, alone and beside a slow effector of the same partition
// (5 ms per record) with 5,000 records waiting. The slow one reads its own
// mailbox once its backlog passes Kind.Overflow, so its neighbours keep the
// partition's window: beside-slow / alone is the head-of-line cost.
func BenchmarkNeighbours(b *testing.B) {
	b.Run("alone", func(b *testing.B) { neighboursRate(b, false, 0) })
	b.Run("beside-slow", func(b *testing.B) { neighboursRate(b, true, 0) })
	// The same without overflow (Kind.Overflow -1): what it saves.
	b.Run("beside-slow-no-overflow", func(b *testing.B) { neighboursRate(b, true, -1) })
}

type lagState struct {
	Count int64 `json:"count"`
}

func lagKind(overflow int) actor.Kind[lagState] {
	return actor.Kind[lagState]{
		Name: "lag", Overflow: overflow,
		Logic: func(ctx *actor.Context, s lagState) (lagState, error) {
			if ctx.Self().ID == "slow" {
				time.Sleep(5 * time.Millisecond)
			}
			s.Count++
			return s, ctx.Emit("count", s)
		},
	}
}

func neighboursRate(b *testing.B, slow bool, overflow int) {
	srv := bustest.NewServer(b)
	conn := srv.Connect(b)
	ctx := context.Background()
	names := conn.Names()
	slowRef := records.Ref{Kind: "lag", ID: "slow"}
	p := names.Partition(slowRef)
	var refs []records.Ref
	for i := 0; len(refs) < 50; i++ {
		if r := (records.Ref{Kind: "lag", ID: fmt.Sprint("n", i)}); names.Partition(r) == p {
			refs = append(refs, r)
		}
	}
	node, err := actor.NewNode(conn, actor.Options{Logger: discard()})
	if err != nil {
		b.Fatal(err)
	}
	if err := node.Host(lagKind(overflow)); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- node.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	if err := node.WaitReady(runCtx); err != nil {
		b.Fatal(err)
	}
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range append([]records.Ref{slowRef}, refs...) {
		if _, err := client.Create(ctx, r, nil); err != nil {
			b.Fatal(err)
		}
	}
	total := max(b.N, 5000)
	var seen atomic.Int64
	finished := make(chan struct{})
	sub, err := conn.NATS().Subscribe(names.Prefix()+".out.lag.*", func(m *nats.Msg) {
		if strings.HasSuffix(m.Subject, ".slow") {
			return
		}
		if seen.Add(1) == int64(total) {
			close(finished)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if slow {
		publish(b, conn, []records.Ref{slowRef}, 5000)
		time.Sleep(200 * time.Millisecond) // its backlog reaches the node first
	}
	b.ResetTimer()
	t0 := time.Now()
	publish(b, conn, refs, total)
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		b.Fatalf("saw %d of %d neighbour outputs", seen.Load(), total)
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/time.Since(t0).Seconds(), "records/s")
}
