package task_test

import (
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/records"
)

// BenchmarkCollect measures one run of an LLM agent streaming 8 chunks from
// the fake server: in process, and on an effector over NATS (task record,
// 8 streamed chunk records, done record).
func BenchmarkCollect(b *testing.B) {
	fake := llmtest.NewServer(b)
	fake.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Chunks: []string{"a", "b", "c", "d", "e", "f", "g", "h"}}
	})
	agent := llmAgent(b, fake)
	b.Run("local", func(b *testing.B) {
		for b.Loop() {
			if _, err := task.Collect(b.Context(), agent, "go"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remote", func(b *testing.B) {
		srv := bustest.NewServer(b)
		actortest.StartNode(b, srv.Connect(b), actor.Options{}, task.Kind("bench", agent))
		client, err := actor.NewClient(b.Context(), srv.Connect(b))
		if err != nil {
			b.Fatal(err)
		}
		target := records.Ref{Kind: "bench", ID: "b1"}
		if _, err := client.Create(b.Context(), target, nil); err != nil {
			b.Fatal(err)
		}
		remote := task.Remote{Client: client, Target: target}
		for b.Loop() {
			res, err := task.Collect(b.Context(), remote, "go")
			if err != nil || res.Text != "abcdefgh" {
				b.Fatal(res, err)
			}
		}
	})
}
