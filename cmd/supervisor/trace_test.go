//go:build unix

package main

import (
	"context"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/node"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/tracing"
	"github.com/effectors/effectors/tracing/tracingtest"
)

// TestDemoIsOneTrace runs the demo orchestration with tracing on, the
// workers on ea-node's command (task-a, task-b) and a real ea-supervisor
// process, both given --otlp-endpoint of a real OTLP/HTTP receiver. A
// caller starts the orchestration and gives its input inside one span of
// its own; the receiver then holds every hop as one trace, each span the
// child of the span that published its input: the caller's span, the
// supervisor's start step, task A's hop, the result step; the input step,
// task B's hop, the result step.
func TestDemoIsOneTrace(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	c, err := supervisor.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// ea-node's command with the demo's workers, in process.
	nodeCtx, stopNode := context.WithCancel(context.Background())
	var nodeOut proctest.Buffer
	nodeDone := make(chan error, 1)
	go func() {
		cmd := node.Command{Name: "ea-node", Kinds: []actor.Definition{kinds.TaskA(), kinds.TaskB()},
			Banner: func(node.Info) string { return "node ready\n" }}
		nodeDone <- cmd.Run(nodeCtx, []string{"--nats", srv.URL, "--metrics", "off", "--log-level", "warn", "--otlp-endpoint", recv.URL},
			func(string) string { return "" }, &nodeOut, io.Discard)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopNode()
			if err := <-nodeDone; err != nil {
				t.Errorf("node: %v", err)
			}
		}
	}
	defer stop()
	actortest.Eventually(t, 90*time.Second, "the node ready", func() bool { return strings.Contains(nodeOut.String(), "node ready") })

	metrics := proctest.FreeAddr(t)
	sup := startProcess(t, "traced", metrics, "--nats", srv.URL, "--metrics", metrics, "--gateway", "off", "--otlp-endpoint", recv.URL)
	sup.waitReady(t, 60*time.Second)

	// The caller: a span of its own, exported to the same receiver.
	caller, flush, err := tracing.Setup(ctx, tracing.Config{Endpoint: recv.URL, ServiceName: "caller"})
	if err != nil {
		t.Fatal(err)
	}
	callCtx, callSpan := caller.Start(ctx, "run the demo", trace.SpanKindClient, records.Record{})
	id, err := c.Start(callCtx, "demo", demo.Input{Text: "trace me"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, id, supervisor.StatusWaiting)
	if _, err := c.Input(callCtx, id, demo.Note{Note: "traced"}); err != nil {
		t.Fatal(err)
	}
	if o := waitStatus(t, c, id, supervisor.StatusCompleted); o.Error != "" {
		t.Fatalf("orchestration: %s", o.Error)
	}
	callSpan.End()
	if err := flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Stopping flushes the spans the processes still buffer.
	stop()
	if err := sup.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := sup.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("ea-supervisor exit code %d", code)
	}

	root := callSpan.SpanContext()
	spans := recv.Trace(root.TraceID().String())
	tree := tracingtest.Tree(spans)
	type want struct{ service, name, parent string }
	chain := []struct {
		step string
		want
	}{
		{"start", want{"ea-supervisor", "orchestration start", "caller"}},
		{"a", want{"ea-node", "process task-a", "start"}},
		{"a-result", want{"ea-supervisor", "orchestration result", "a"}},
		{"input", want{"ea-supervisor", "orchestration input", "caller"}},
		{"b", want{"ea-node", "process task-b", "input"}},
		{"b-result", want{"ea-supervisor", "orchestration result", "b"}},
	}
	ids := map[string]string{"caller": root.SpanID().String()}
	for _, c := range chain {
		parent := ids[c.parent]
		var found []tracingtest.Span
		for _, s := range spans {
			if s.Service == c.service && s.Name == c.name && s.ParentID == parent {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("step %s: %d spans %q of %s with parent %s (%s), want 1; the trace:\n%s", c.step, len(found), c.name, c.service, parent, c.parent, tree)
		}
		ids[c.step] = found[0].SpanID
	}
	// No hop of the run is outside the caller's trace.
	for _, s := range recv.Spans() {
		if (s.Service == "ea-node" || s.Service == "ea-supervisor") && s.TraceID != root.TraceID().String() {
			t.Errorf("span outside the caller's trace: %v", s)
		}
	}
	t.Logf("the demo's trace:\n%s", tree)
}
