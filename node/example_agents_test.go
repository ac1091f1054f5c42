package node_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/node"
	"github.com/effectors/effectors/records"
)

// A node binary with an agent kind: Command.Agents builds it with the model
// of the --llm-* settings (here from the environment, as EA_LLM_BASE_URL
// and EA_LLM_MODEL would give it; a fake OpenAI-compatible server stands in
// for the model). Without a model the node would host its other kinds only.
func ExampleCommand_agents() {
	fake := llmtest.Start()
	defer fake.Close()
	fake.Respond(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Chunks: []string{"Queues ", "wait; ", "readers ", "come."}}
	})
	dir, _ := os.MkdirTemp("", "node-agents-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ready := make(chan node.Info, 1)
	cmd := node.Command{
		Name: "writer-node",
		Agents: func(a node.Agents) ([]actor.Definition, error) {
			writer, err := core.Wrap(a.Services, core.Permissions{Services: []core.Service{core.ServiceLLM}},
				task.Kind("writer", task.LLMAgent{System: "You write haiku."}))
			return []actor.Definition{writer}, err
		},
		Banner: func(in node.Info) string { ready <- in; return "" },
	}
	env := map[string]string{"EA_LLM_BASE_URL": fake.URL, "EA_LLM_MODEL": "fake-model"}
	args := []string{"--listen", "127.0.0.1:0", "--store", dir, "--metrics", "off", "--log-level", "error"}
	nodeCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		stopped <- cmd.Run(nodeCtx, args, func(k string) string { return env[k] }, io.Discard, io.Discard)
	}()
	defer func() { stop(); <-stopped }()

	var in node.Info
	select {
	case in = <-ready:
	case err := <-stopped:
		fmt.Println("node stopped:", err)
		return
	}
	fmt.Println("kinds:", in.Kinds, "model:", in.LLM == "fake-model at "+fake.URL)

	conn, err := bus.Connect(ctx, bus.Config{URL: in.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client, _ := actor.NewClient(ctx, conn)
	w1 := records.Ref{Kind: "writer", ID: "w1"}
	if _, err := client.Create(ctx, w1, nil); err != nil {
		fmt.Println(err)
		return
	}
	res, err := task.Collect(ctx, task.Remote{Client: client, Target: w1}, "a haiku about queues")
	fmt.Println(res.Text, err)
	// Output:
	// kinds: [writer] model: true
	// Queues wait; readers come. <nil>
}
