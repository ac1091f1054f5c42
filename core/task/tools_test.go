package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/core/task"
	"github.com/effectors/effectors/records"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// toolAgent adds numbers; calls with a number over 99 need an approval.
func toolAgent(t testing.TB, srv *llmtest.Server) task.ToolAgent {
	t.Helper()
	p, err := llm.New(llm.Config{BaseURL: srv.URL, Model: "m", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tools := core.NewTools()
	add, err := core.NewTool("add", "adds two integers", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.Register(add); err != nil {
		t.Fatal(err)
	}
	return task.ToolAgent{LLM: p, Tools: tools, Names: []string{"add"}, System: "calculator",
		CanUseTool: func(_ context.Context, c core.ToolCall) (core.Decision, error) {
			var in addArgs
			if err := json.Unmarshal(c.Arguments, &in); err != nil {
				return core.Deny("bad arguments"), nil
			}
			if in.A > 99 || in.B > 99 {
				return core.Ask("a big number"), nil
			}
			return core.Allow(), nil
		}}
}

// script is the fake model's answers to one run: a small call, a big call,
// then the final answer.
func script(srv *llmtest.Server) { untilAsk(srv); srv.Enqueue(llmtest.Reply{Text: "the end"}) }

// untilAsk is the answers up to the call that needs an approval.
func untilAsk(srv *llmtest.Server) {
	srv.Enqueue(
		llmtest.Reply{Text: "first ", ToolCalls: []llmtest.ToolCall{{ID: "small", Name: "add", Arguments: `{"a":1,"b":2}`}}},
		llmtest.Reply{Text: "then ", ToolCalls: []llmtest.ToolCall{{ID: "big", Name: "add", Arguments: `{"a":100,"b":200}`}}},
	)
}

func types(evs []task.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

const approvedEvents = "tool.call tool.result tool.call tool.approval tool.decision tool.result llm.usage"

// Locally: Collect answers approvals from Go; the run streams text and
// reports every call, approval, decision, result and its usage.
func TestToolAgentLocal(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	agent := toolAgent(t, srv)
	script(srv)
	approvals := core.NewApprovals()
	go func() {
		if a, err := approvals.Next(t.Context()); err == nil {
			_ = approvals.Answer(a.ID, core.Deny("too big for today"))
		}
	}()
	res, err := task.Collect(t.Context(), agent, "add", task.Approve(approvals.Ask))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "first then the end" || types(res.Events) != approvedEvents {
		t.Fatalf("text %q events %s", res.Text, types(res.Events))
	}
	var last core.ToolEvent
	if err := json.Unmarshal(res.Events[5].Data, &last); err != nil || last.Result != "denied: too big for today" {
		t.Fatalf("result event %+v %v", last, err)
	}
	if res.Usage.Input == 0 || res.Usage.Output != 2+2+2 { // "first "+args, "then "+args, "the end"
		t.Fatalf("usage %+v", res.Usage)
	}
	if got := srv.Requests()[2].Messages[5].Text(); got != "denied: too big for today" {
		t.Fatalf("the model saw %q", got)
	}

	// Nobody to ask: the run fails with the pause in its error.
	untilAsk(srv)
	res, err = task.Collect(t.Context(), agent, "add")
	var p *core.Pause
	if !errors.Is(err, core.ErrApproval) || !errors.As(err, &p) || p.Approval.ID != "big" || !res.Partial {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// As a remote effector: the approval travels as an event on the outbox and
// its answer as a task.approve record in the mailbox — given by the Remote
// caller's asker, or by any NATS client.
// It runs on one mailbox stream and on stream groups (the run reads its
// answers from its effector's group's mailbox stream).
func TestToolAgentRemote(t *testing.T) {
	t.Parallel()
	t.Run("one stream", func(t *testing.T) {
		t.Parallel()
		srv := bustest.NewServer(t)
		toolAgentRemote(t, func() *bus.Conn { return srv.Connect(t) })
	})
	t.Run("stream groups", func(t *testing.T) {
		t.Parallel()
		srv := bustest.NewServer(t)
		srv.MapPartitions(t, 8)
		toolAgentRemote(t, func() *bus.Conn { return srv.Connect(t, bus.Config{Partitions: 8, Groups: 4}) })
	})
}

func toolAgentRemote(t *testing.T, connect func() *bus.Conn) {
	fake := llmtest.NewServer(t)
	nodeConn := connect()
	agent := toolAgent(t, fake)
	actortest.StartNode(t, nodeConn, actor.Options{},
		task.Kind("adder", agent, task.ApproveByRecords(nodeConn)),
		task.Kind("noask", agent))
	client, err := actor.NewClient(t.Context(), connect())
	if err != nil {
		t.Fatal(err)
	}
	target := records.Ref{Kind: "adder", ID: "a1"}
	for _, r := range []records.Ref{target, {Kind: "noask", ID: "n1"}} {
		if _, err := client.Create(t.Context(), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	remote := task.Remote{Client: client, Target: target, StopWait: 10 * time.Second}

	t.Run("caller answers", func(t *testing.T) {
		script(fake)
		var asked []core.Approval
		res, err := task.Collect(t.Context(), remote, "add", task.Approve(func(_ context.Context, a core.Approval) (core.Decision, error) {
			asked = append(asked, a)
			return core.Allow(), nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "first then the end" || types(res.Events) != approvedEvents || len(asked) != 1 || asked[0].Reason != "a big number" {
			t.Fatalf("text %q events %s asked %+v", res.Text, types(res.Events), asked)
		}
		var result core.ToolEvent
		if err := json.Unmarshal(res.Events[5].Data, &result); err != nil || result.Result != "300" {
			t.Fatalf("result %+v", result)
		}
		if res.Usage.Output != 6 {
			t.Fatalf("usage %+v", res.Usage)
		}
	})

	t.Run("any NATS client answers", func(t *testing.T) {
		script(fake)
		outputs, err := client.Subscribe(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			for out, err := range outputs {
				if err != nil || out.Type != task.TypeEvent {
					continue
				}
				var e task.Event
				if out.Decode(&e) != nil || e.Type != core.EventApproval {
					continue
				}
				// What `nats pub ea.mbox.adder.a1 '{"id":"big","verdict":"deny","reason":"no"}' -H EA-Type:task.approve -H EA-Process:<session>` does.
				rec, err := records.New(task.TypeApprove, task.Answer{ID: "big", Verdict: core.VerdictDeny, Reason: "not over NATS"})
				if err == nil {
					rec.Process = out.Process
					_, err = client.Send(t.Context(), target, rec)
				}
				answered <- err
				return
			}
		}()
		res, err := task.Collect(t.Context(), remote, "add", task.With(task.Start{Session: "nats-1"}))
		if err != nil {
			t.Fatal(err)
		}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(res.Events[5].Data), "denied: not over NATS") {
			t.Fatalf("events %s: %s", types(res.Events), res.Events[5].Data)
		}
	})

	t.Run("answer stored before the question", func(t *testing.T) {
		// The answer is a record in the mailbox: one sent before the run
		// asks (or read again by a run redone after a crash) is found.
		script(fake)
		outputs, err := client.Subscribe(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		taskRec, err := records.New(task.TypeTask, task.Request{Input: "add"})
		if err != nil {
			t.Fatal(err)
		}
		approve, err := records.New(task.TypeApprove, task.Answer{ID: "big", Verdict: core.VerdictAllow})
		if err != nil {
			t.Fatal(err)
		}
		taskRec.Process, approve.Process = "early-1", "early-1"
		for _, r := range []records.Record{taskRec, approve} {
			if _, err := client.Send(t.Context(), target, r); err != nil {
				t.Fatal(err)
			}
		}
		// Read to the run's end, not only to the result: a run still going
		// would take the next subtest's scripted model replies.
		approved := false
		for out, err := range outputs {
			if err != nil || out.Process != "early-1" {
				continue
			}
			if out.Type == task.TypeError {
				t.Fatalf("run failed: %s", out.Payload)
			}
			if out.Type == task.TypeEvent && strings.Contains(string(out.Payload), `"result":"300"`) {
				approved = true
			}
			if out.Type == task.TypeDone {
				break
			}
		}
		if !approved {
			t.Fatal("the run ended without the approved call's result 300")
		}
	})

	t.Run("no one can answer", func(t *testing.T) {
		untilAsk(fake)
		_, err := task.Collect(t.Context(), task.Remote{Client: client, Target: records.Ref{Kind: "noask", ID: "n1"}}, "add")
		if !errors.Is(err, core.ErrApproval) {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		untilAsk(fake)
		ctx, cancel := context.WithCancel(t.Context())
		_, err := task.Collect(ctx, remote, "add", task.Approve(func(ctx context.Context, a core.Approval) (core.Decision, error) {
			cancel() // the caller gives up instead of answering
			<-ctx.Done()
			return core.Decision{}, ctx.Err()
		}))
		if !errors.Is(err, core.ErrCancelled) {
			t.Fatalf("err %v", err)
		}
	})
	actortest.Eventually(t, 20*time.Second, "run counts", func() bool {
		doc, err := client.State(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		var s task.Stats
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s == task.Stats{Completed: 3, Cancelled: 1}
	})
}

// A timeout while the model streams, and a cancel while an approval waits,
// both really stop the run: the HTTP stream is closed, the asker returns.
func TestToolAgentStops(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	agent := toolAgent(t, srv)
	srv.Enqueue(llmtest.Reply{Chunks: []string{"thinking"}, Hang: true})
	// Long enough for the first chunk to arrive under load (make test
	// failed once with 200 ms: the timeout came before it); the model
	// hangs after it, so the timeout still ends the run.
	res, err := task.Collect(t.Context(), agent, "add", task.Timeout(2*time.Second))
	if !errors.Is(err, core.ErrTimeout) || res.Text != "thinking" || !res.Partial {
		t.Fatalf("res %+v err %v", res, err)
	}
	waitDisconnect(t, srv)

	untilAsk(srv)
	approvals := core.NewApprovals()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		if _, err := approvals.Next(ctx); err == nil {
			cancel()
		}
	}()
	_, err = task.Collect(ctx, agent, "add", task.Approve(approvals.Ask))
	cancel()
	if !errors.Is(err, core.ErrCancelled) || len(approvals.Pending()) != 0 {
		t.Fatalf("err %v pending %v", err, approvals.Pending())
	}
}
