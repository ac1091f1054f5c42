package threads_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/examples/threads"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// model is the fake provider's brain: workers answer with what they heard
// and how many turns they remember; the supervisor's decisions are scripted
// per goal.
type model struct {
	mu        sync.Mutex
	decisions map[string][]string
}

func (m *model) respond(r llmtest.Request) llmtest.Reply {
	switch r.System() {
	case threads.WorkerPrompt:
		if r.LastUser() == goalNobodyAnswers {
			return llmtest.Reply{Status: 400}
		}
		return llmtest.Reply{Text: fmt.Sprintf("on %q, remembering %d turn(s)", r.LastUser(), (len(r.Messages)-2)/2)}
	case threads.DecidePrompt:
		goal := strings.TrimPrefix(strings.SplitN(r.LastUser(), "\n", 2)[0], "Goal: ")
		m.mu.Lock()
		defer m.mu.Unlock()
		q := m.decisions[goal]
		if len(q) == 0 {
			return llmtest.Reply{Status: 400}
		}
		m.decisions[goal] = q[1:]
		return llmtest.Reply{Text: q[0]}
	}
	return llmtest.Reply{Status: 400}
}

type env struct {
	client *actor.Client
	sup    *supervisor.Client
	fake   *llmtest.Server
	logs   *syncBuffer
	reg    *prometheus.Registry
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func setup(t *testing.T, m *model) env {
	t.Helper()
	srv := bustest.NewServer(t)
	fake := llmtest.NewServer(t)
	fake.Respond(m.respond)
	p, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "m", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := core.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	svc := &core.Services{LLM: p, Metrics: metrics}
	worker, err := threads.Worker(svc)
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, srv.Connect(t), actor.Options{}, worker)

	logs := &syncBuffer{}
	s, err := supervisor.New(srv.Connect(t), supervisor.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	def, err := threads.Define(svc, threads.Config{MaxRounds: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(def); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	actortest.Eventually(t, 20*time.Second, "supervisor ready", s.Ready)
	conn := srv.Connect(t)
	client, err := actor.NewClient(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := supervisor.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	return env{client: client, sup: sc, fake: fake, logs: logs, reg: reg}
}

func (e env) run(t *testing.T, goal string) (supervisor.Orchestration, threads.State) {
	t.Helper()
	id, err := e.sup.Start(t.Context(), threads.Name, map[string]string{"goal": goal})
	if err != nil {
		t.Fatal(err)
	}
	var o supervisor.Orchestration
	actortest.Eventually(t, 30*time.Second, "orchestration completed", func() bool {
		o, err = e.sup.Status(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == supervisor.StatusFailed || o.Status == supervisor.StatusCancelled {
			t.Fatalf("orchestration %s: %s", o.Status, o.Error)
		}
		return o.Status == supervisor.StatusCompleted
	})
	var s threads.State
	if err := json.Unmarshal(o.Results, &s); err != nil {
		t.Fatal(err)
	}
	return o, s
}

func nexts(ds []threads.Decision) string {
	var s []string
	for _, d := range ds {
		n := d.Next
		if d.Fallback {
			n += "(fallback)"
		}
		s = append(s, n)
	}
	return strings.Join(s, " ")
}

func (e env) status(t *testing.T, thread string) actor.Status {
	t.Helper()
	ref, err := records.ParseRef(thread)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := e.client.State(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Status
}

// The model branches, follows up, then finishes: the supervisor creates the
// main thread, branches it after its first turn, sends to both, and kills
// both at the end; every decision is in the status and the log.
func TestModelDrives(t *testing.T) {
	m := &model{decisions: map[string][]string{"why is the sky blue": {
		`{"next":"branch","message":"and at sunset?","reason":"compare"}`,
		`{"next":"followup","message":"say more","reason":"too short"}`,
		`{"next":"finish","message":"Rayleigh scattering","reason":"enough"}`,
	}}}
	e := setup(t, m)
	o, s := e.run(t, "why is the sky blue")
	if got := nexts(s.Decisions); got != "branch followup finish" {
		t.Fatalf("decisions %s\n%s", got, o.Results)
	}
	if s.Final != "Rayleigh scattering" || len(s.Answers) != 3 || len(s.Threads) != 2 {
		t.Fatalf("state %+v", s)
	}
	// The branch remembered the first turn only; the main thread both of its own.
	want := []string{
		`on "why is the sky blue", remembering 0 turn(s)`,
		`on "and at sunset?", remembering 1 turn(s)`,
		`on "say more", remembering 1 turn(s)`,
	}
	for i, a := range s.Answers {
		if a.Text != want[i] {
			t.Fatalf("answer %d: %q, want %q", i, a.Text, want[i])
		}
	}
	if s.Answers[1].Thread == s.Main || s.Answers[2].Thread != s.Main || s.Answers[2].Turn != 2 || s.Answers[1].Turn != 2 {
		t.Fatalf("answers %+v", s.Answers)
	}
	for _, th := range s.Threads {
		if st := e.status(t, th); st != actor.StatusTerminated {
			t.Fatalf("thread %s is %s after finish", th, st)
		}
	}
	if logs := e.logs.String(); strings.Count(logs, "msg=decision") != 3 || !strings.Contains(logs, "choice=branch next=branch fallback=false") {
		t.Fatalf("log:\n%s", logs)
	}
	// The decision prompt carried the workers' answers.
	var last llmtest.Request
	for _, r := range e.fake.Requests() {
		if r.System() == threads.DecidePrompt {
			last = r
		}
	}
	if !strings.Contains(last.LastUser(), "say more") || len(last.ResponseFormat) == 0 {
		t.Fatalf("last decision request %q format %s", last.LastUser(), last.ResponseFormat)
	}
	// Tokens counted for the orchestration and for its workers.
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "ea_llm_tokens_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "kind" && mt.GetCounter().GetValue() > 0 {
					kinds[l.GetValue()] = true
				}
			}
		}
	}
	if !kinds[threads.Name] || !kinds[threads.WorkerKind] {
		t.Fatalf("tokens counted for %v", kinds)
	}
}

// A choice that is not a step, one that does not fit the schema, and a
// model that answers nothing usable all fall back to finish.
func TestFallback(t *testing.T) {
	m := &model{decisions: map[string][]string{
		"not a step": {`{"next":"dance","message":"x","reason":"fun"}`},
		"not json":   {`I think we should branch`},
		"no message": {`{"next":"followup","message":"","reason":"?"}`},
		"down":       {}, // the provider answers 400
	}}
	e := setup(t, m)
	for goal, why := range map[string]string{
		"not a step": `"dance" is not a step`,
		"not json":   "unusable",
		"no message": "followup without a message",
		"down":       "unusable",
	} {
		t.Run(goal, func(t *testing.T) {
			_, s := e.run(t, goal)
			if len(s.Decisions) != 1 || !s.Decisions[0].Fallback || s.Decisions[0].Next != threads.StepFinish ||
				!strings.Contains(s.Decisions[0].Why, why) {
				t.Fatalf("decisions %+v", s.Decisions)
			}
			if s.Final != fmt.Sprintf("on %q, remembering 0 turn(s)", goal) {
				t.Fatalf("final %q", s.Final)
			}
		})
	}
	if !strings.Contains(e.logs.String(), "fallback=true") {
		t.Fatal("no fallback in the log")
	}
}

// goalNobodyAnswers is a goal the workers' model answers with an error.
const goalNobodyAnswers = "nobody answers"

// With the model down for the threads and for the decision, nothing was
// answered: the orchestration kills its thread and ends FAILED with the
// threads' error, not COMPLETED with no answer.
func TestNoAnswerFails(t *testing.T) {
	e := setup(t, &model{decisions: map[string][]string{}})
	id, err := e.sup.Start(t.Context(), threads.Name, map[string]string{"goal": goalNobodyAnswers})
	if err != nil {
		t.Fatal(err)
	}
	var o supervisor.Orchestration
	actortest.Eventually(t, 60*time.Second, "orchestration ended", func() bool {
		o, err = e.sup.Status(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return o.Status != supervisor.StatusRunning
	})
	if o.Status != supervisor.StatusFailed || !strings.Contains(o.Error, "no thread answered") || !strings.Contains(o.Error, "could not process the task") {
		t.Fatalf("orchestration %s, error %q; want FAILED: no thread answered, with the worker's error", o.Status, o.Error)
	}
	var s threads.State
	if err := json.Unmarshal(o.Results, &s); err != nil {
		t.Fatal(err)
	}
	for _, th := range s.Threads {
		if st := e.status(t, th); st != actor.StatusTerminated {
			t.Errorf("thread %s: %s, want TERMINATED", th, st)
		}
	}
}
