package supervisord_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/supervisord"
)

// shout is the state of a one-step orchestration.
type shout struct {
	Text string `json:"text"`
}

// A supervisor binary for your own orchestrations is one line:
//
//	func main() { supervisord.Main(def) }
//
// This example runs the same command in-process against a NATS server
// embedded on a free port, and drives an orchestration through the
// orchestration API it serves: the banner hands over what it serves.
func ExampleCommand() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, _ := os.MkdirTemp("", "supervisord-example-")
	defer os.RemoveAll(dir)
	conn, err := bus.Connect(ctx, bus.Config{Listen: "127.0.0.1:0", StoreDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	b := graph.New[shout]()
	b.AddNode("upper", func(_ context.Context, s shout) (graph.Update[shout], error) {
		return graph.Replace(shout{Text: strings.ToUpper(s.Text)}), nil
	})
	b.AddEdge(graph.START, "upper").AddEdge("upper", graph.END)
	def, err := supervisor.Define(supervisor.Spec[shout]{Name: "shout", Graph: b})
	if err != nil {
		fmt.Println(err)
		return
	}

	ready := make(chan supervisord.Info, 1)
	cmd := supervisord.Command{
		Name:        "shout-supervisor",
		Definitions: []supervisor.Definition{def},
		Banner:      func(in supervisord.Info) string { ready <- in; return "" },
	}
	args := []string{"--nats", conn.ClientURL(), "--metrics", "off", "--gateway", "off", "--log-level", "error"}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Run(runCtx, args, func(string) string { return "" }, io.Discard, io.Discard) }()
	defer func() { stop(); <-stopped }()

	select {
	case in := <-ready:
		fmt.Println("orchestrations:", in.Orchestrations, "gateway off:", in.Gateway == "")
	case err := <-stopped:
		fmt.Println("supervisor stopped:", err)
		return
	}

	client, _ := supervisor.NewClient(conn)
	id, err := client.Start(ctx, "shout", shout{Text: "hello"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		o, err := client.Status(ctx, id)
		if err != nil {
			fmt.Println(err)
			return
		}
		if o.Status.Final() {
			fmt.Println(o.Status, string(o.Results))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output:
	// orchestrations: [shout] gateway off: true
	// COMPLETED {"text":"HELLO"}
}
