package conversation_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/conversation"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/records"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memoryModel answers with what it heard and how much history it was given.
func memoryModel(r llmtest.Request) llmtest.Reply {
	if r.System() == conversation.SummaryPrompt {
		return llmtest.Reply{Text: fmt.Sprintf("summary of %d turns", strings.Count(r.LastUser(), "user: "))}
	}
	users := 0
	for _, m := range r.Messages {
		if m.Role == "user" {
			users++
		}
	}
	return llmtest.Reply{Text: fmt.Sprintf("heard %q after %d earlier turns", r.LastUser(), users-1)}
}

type env struct {
	client *actor.Client
	fake   *llmtest.Server
}

func setup(t *testing.T, cfg conversation.Config) env {
	t.Helper()
	srv := bustest.NewServer(t)
	fake := llmtest.NewServer(t)
	fake.Respond(memoryModel)
	p, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "m", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := conversation.Kind(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := core.Wrap(&core.Services{LLM: p}, core.Permissions{Services: []core.Service{core.ServiceLLM}}, k)
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, srv.Connect(t), actor.Options{}, wrapped)
	client, err := actor.NewClient(t.Context(), srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	return env{client: client, fake: fake}
}

// say sends text to ref and waits for the reply of that turn.
func (e env) say(t *testing.T, ref records.Ref, text string) conversation.Reply {
	t.Helper()
	outs, err := e.client.Subscribe(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	process := records.NewID()
	if _, err := conversation.Send(t.Context(), e.client, ref, process, text); err != nil {
		t.Fatal(err)
	}
	var chunks strings.Builder
	for out, err := range outs {
		if err != nil {
			t.Fatal(err)
		}
		if out.Process != process {
			continue
		}
		switch out.Type {
		case conversation.TypeChunk:
			var m conversation.Message
			if err := out.Decode(&m); err != nil {
				t.Fatal(err)
			}
			chunks.WriteString(m.Text)
		case conversation.TypeReply:
			var r conversation.Reply
			if err := out.Decode(&r); err != nil {
				t.Fatal(err)
			}
			if chunks.String() != r.Text {
				t.Fatalf("streamed %q, replied %q", chunks.String(), r.Text)
			}
			return r
		}
	}
	t.Fatal("no reply")
	return conversation.Reply{}
}

// state returns ref's state once it has taken count turns (a reply is
// published before the state that holds it is written).
func (e env) state(t *testing.T, ref records.Ref, count int) conversation.State {
	t.Helper()
	var s conversation.State
	actortest.Eventually(t, 10*time.Second, fmt.Sprintf("%s after %d turns", ref, count), func() bool {
		doc, err := e.client.State(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		s = conversation.State{}
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s.Count >= count
	})
	return s
}

// Turns remember, the history is bounded by a summary, a branch copies the
// history up to a turn and goes its own way, and a killed thread takes no
// more messages.
func TestThreads(t *testing.T) {
	e := setup(t, conversation.Config{Name: "chat", System: "be kind", MaxTurns: 3, Keep: 1})
	t1 := records.Ref{Kind: "chat", ID: "t1"}
	if err := conversation.Create(t.Context(), e.client, t1); err != nil {
		t.Fatal(err)
	}
	if r := e.say(t, t1, "I am Ada"); r.Turn != 1 || r.Text != `heard "I am Ada" after 0 earlier turns` || r.Usage.Output == 0 {
		t.Fatalf("turn 1: %+v", r)
	}
	if r := e.say(t, t1, "who am I?"); r.Turn != 2 || r.Text != `heard "who am I?" after 1 earlier turns` {
		t.Fatalf("turn 2: %+v", r)
	}
	// The second request carried the first turn.
	reqs := e.fake.Requests()
	if m := reqs[1].Messages; len(m) != 4 || m[1].Text() != "I am Ada" || m[0].Text() != "be kind" {
		t.Fatalf("second request %+v", m)
	}

	// Branch after turn 1: the branch forgets turn 2.
	e.state(t, t1, 2)
	b1 := records.Ref{Kind: "chat", ID: "b1"}
	if err := conversation.Branch(t.Context(), e.client, t1, b1, 1); err != nil {
		t.Fatal(err)
	}
	if r := e.say(t, b1, "a different question"); r.Turn != 2 || r.Text != `heard "a different question" after 1 earlier turns` {
		t.Fatalf("branch turn: %+v", r)
	}
	if s := e.state(t, t1, 2); s.Count != 2 || len(s.Turns) != 2 {
		t.Fatalf("the branch changed the original: %+v", s)
	}

	// Turns 3 and 4: past MaxTurns 3, turns 1-3 become the summary, turn 4 is kept.
	e.say(t, t1, "third")
	e.say(t, t1, "fourth")
	s := e.state(t, t1, 4)
	if s.Count != 4 || len(s.Turns) != 1 || s.Turns[0].N != 4 || s.Summary != "summary of 3 turns" || s.SummaryThrough != 3 {
		t.Fatalf("state after 4 turns: %+v", s)
	}
	if r := e.say(t, t1, "fifth"); r.Text != `heard "fifth" after 1 earlier turns` {
		t.Fatalf("turn 5: %+v", r)
	}
	reqs = e.fake.Requests()
	if sys := reqs[len(reqs)-1].System(); sys != "be kind\n\nSummary of the earlier conversation: summary of 3 turns" {
		t.Fatalf("system prompt after a summary: %q", sys)
	}
	if s := e.state(t, t1, 5); s.Usage.Input == 0 || s.Usage.Output == 0 {
		t.Fatalf("usage %+v", s.Usage)
	}
	// A branch point inside the summary is refused.
	e.state(t, t1, 5)
	if err := conversation.Branch(t.Context(), e.client, t1, records.Ref{Kind: "chat", ID: "b2"}, 2); !errors.Is(err, conversation.ErrSummarised) {
		t.Fatalf("branch inside the summary: %v", err)
	}

	// Kill.
	if err := conversation.Kill(t.Context(), e.client, t1); err != nil {
		t.Fatal(err)
	}
	if err := conversation.Kill(t.Context(), e.client, t1); err != nil {
		t.Fatalf("second kill: %v", err)
	}
	if _, err := conversation.Send(t.Context(), e.client, t1, "", "hello?"); !errors.Is(err, actor.ErrTerminated) {
		t.Fatalf("send to a killed thread: %v", err)
	}
}

// DropOldest forgets without asking the model.
func TestDropOldest(t *testing.T) {
	e := setup(t, conversation.Config{Name: "short", MaxTurns: 2, Keep: 1, Summarize: conversation.DropOldest})
	ref := records.Ref{Kind: "short", ID: "s1"}
	if err := conversation.Create(t.Context(), e.client, ref); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two", "three"} {
		e.say(t, ref, text)
	}
	if s := e.state(t, ref, 3); len(s.Turns) != 1 || s.Turns[0].User != "three" || s.Summary != "" || s.SummaryThrough != 2 {
		t.Fatalf("state %+v", s)
	}
	if n := len(e.fake.Requests()); n != 3 {
		t.Fatalf("%d requests: the policy asked the model", n)
	}
}

func TestConfigInvalid(t *testing.T) {
	for _, cfg := range []conversation.Config{{}, {Name: "a.b"}, {Name: "c", MaxTurns: 2, Keep: 2}, {Name: "c", MaxTurns: -1}} {
		if _, err := conversation.Kind(cfg); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestBranchState(t *testing.T) {
	s := conversation.State{Turns: []conversation.Turn{{N: 3}, {N: 4}, {N: 5}}, Count: 5, Summary: "x", SummaryThrough: 2}
	b, err := conversation.BranchState(s, 4)
	if err != nil || b.Count != 4 || len(b.Turns) != 2 || b.Summary != "x" {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := conversation.BranchState(s, 1); !errors.Is(err, conversation.ErrSummarised) {
		t.Fatal(err)
	}
}
