package effector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/graph/effector"
	"github.com/effectors/effectors/records"
)

// BenchmarkLiveRun: one record runs a one-node graph that writes 10
// message chunks; with live publishing off (the baseline), then on (ten
// publishes per record, each awaited). Reported per record, records sent
// in a burst of b.N and awaited on the state document.
func BenchmarkLiveRun(b *testing.B) {
	const chunks = 10
	for _, mode := range []struct {
		name string
		live graph.StreamMode
	}{{"off", 0}, {"messages", effector.DefaultLive}} {
		b.Run(fmt.Sprintf("live=%s/chunks=%d", mode.name, chunks), func(b *testing.B) {
			gb := graph.New[liveState]()
			gb.AddNode("talk", func(ctx context.Context, s liveState) (graph.Update[liveState], error) {
				for i := range chunks {
					graph.WriteMessage(ctx, fmt.Sprintf("tok%d ", i))
				}
				return graph.Update[liveState]{}, nil
			})
			gb.AddEdge(graph.START, "talk")
			g, err := gb.Compile()
			if err != nil {
				b.Fatal(err)
			}
			srv := bustest.NewServer(b)
			conn := srv.Connect(b)
			kind, err := effector.Kind(actor.Kind[liveState]{Name: "bench"}, g, effector.Live(mode.live))
			if err != nil {
				b.Fatal(err)
			}
			actortest.StartNode(b, conn, actor.Options{}, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			client, err := actor.NewClient(ctx, conn)
			if err != nil {
				b.Fatal(err)
			}
			ref := records.Ref{Kind: "bench", ID: "b1"}
			actortest.Create(b, client, ref, liveState{})
			b.ResetTimer()
			var last uint64
			for range b.N {
				rec, _ := records.New("go", nil)
				sent, err := client.Send(ctx, ref, rec)
				if err != nil {
					b.Fatal(err)
				}
				last = sent.Seq
			}
			actortest.Eventually(b, 5*time.Minute, "all applied", func() bool {
				d, err := client.State(ctx, ref)
				return err == nil && d.Seq >= last
			})
		})
	}
}
