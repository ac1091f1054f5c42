package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llm"
	"github.com/effectors/effectors/core/llmtest"
	"github.com/effectors/effectors/records"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func provider(t *testing.T, srv *llmtest.Server) *llm.Provider {
	t.Helper()
	p, err := llm.New(llm.Config{BaseURL: srv.URL, Model: "m", Retry: llm.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestErrorMatching(t *testing.T) {
	cause := errors.New("boom")
	err := fmt.Errorf("outer: %w", core.E(core.CodeTimeout, "op", cause))
	if !errors.Is(err, core.ErrTimeout) || errors.Is(err, core.ErrFailed) || !errors.Is(err, cause) {
		t.Fatalf("matching wrong for %v", err)
	}
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.CodeTimeout || ce.Op != "op" {
		t.Fatalf("As = %+v", ce)
	}
	if core.CodeOf(err) != core.CodeTimeout || core.CodeOf(cause) != "" {
		t.Fatal("CodeOf wrong")
	}
	if got := err.Error(); got != "outer: op: timeout: boom" {
		t.Fatalf("Error() = %q", got)
	}
}

type payload struct{ N int }

// TestRun covers every path of the run bridge.
func TestRun(t *testing.T) {
	cause := errors.New("cause")
	scope := (&core.Services{}).Scope("k", core.Permissions{})
	release, finished := make(chan struct{}), make(chan struct{})
	for _, tc := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		fn    func(context.Context) (int, error)
		opts  []core.RunOption
		code  core.Code
		check func(t *testing.T, err error)
	}{
		{name: "ok", fn: func(ctx context.Context) (int, error) {
			if s, err := core.From(ctx); err != nil || s != scope {
				return 0, fmt.Errorf("scope not in context: %v", err)
			}
			return 42, nil
		}},
		{name: "error", fn: func(context.Context) (int, error) { return 0, cause }, code: core.CodeFailed,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, cause) {
					t.Fatal("cause lost")
				}
			}},
		{name: "core error kept", fn: func(context.Context) (int, error) {
			return 0, core.E(core.CodePermission, "x", cause)
		}, code: core.CodePermission},
		{name: "panic", fn: func(context.Context) (int, error) { panic(cause) }, code: core.CodePanic,
			check: func(t *testing.T, err error) {
				var pe *core.PanicError
				if !errors.As(err, &pe) || pe.Value != cause || len(pe.Stack) == 0 || !errors.Is(err, cause) {
					t.Fatalf("panic error %+v", pe)
				}
			}},
		{name: "timeout honoured", opts: []core.RunOption{core.Timeout(20 * time.Millisecond)},
			fn: func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }, code: core.CodeTimeout},
		{name: "timeout ignored by fn", opts: []core.RunOption{core.Timeout(20 * time.Millisecond)},
			fn: func(ctx context.Context) (int, error) { defer close(finished); <-release; return 1, nil }, code: core.CodeTimeout,
			check: func(t *testing.T, err error) { close(release); <-finished }},
		{name: "cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() { time.Sleep(10 * time.Millisecond); cancel(cause) }()
			return ctx, func() { cancel(nil) }
		}, fn: func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, context.Cause(ctx) }, code: core.CodeCancelled,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, cause) {
					t.Fatalf("cancel cause lost: %v", err)
				}
			}},
		{name: "already cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, fn: func(context.Context) (int, error) { return 1, nil }, code: core.CodeCancelled},
		{name: "caller deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, fn: func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }, code: core.CodeTimeout},
		{name: "bad timeout", opts: []core.RunOption{core.Timeout(-1)}, fn: func(context.Context) (int, error) { return 1, nil }, code: core.CodeInvalid},
		{name: "nil fn", code: core.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			v, err := core.Run(ctx, scope, tc.fn, tc.opts...)
			if tc.code == "" {
				if err != nil || v != 42 {
					t.Fatalf("v %d err %v", v, err)
				}
				return
			}
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
		})
	}
}

func TestPipelines(t *testing.T) {
	ps := core.NewPipelines()
	up, err := core.NewPipeline("upper", "upper-cases text", func(_ context.Context, in string) (string, error) {
		return strings.ToUpper(in), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fail, _ := core.NewPipeline("fail", "", func(_ context.Context, in payload) (payload, error) {
		return payload{}, errors.New("nope")
	})
	if err := ps.Register(up, fail); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := ps.Call(t.Context(), "upper", "abc", &out); err != nil || out != "ABC" {
		t.Fatalf("out %q err %v", out, err)
	}
	if got := ps.List(); len(got) != 2 || got[0].Name != "fail" || got[1] != (core.PipelineInfo{Name: "upper", Description: "upper-cases text"}) {
		t.Fatalf("List = %+v", got)
	}
	for _, tc := range []struct {
		name string
		err  error
		code core.Code
	}{
		{"duplicate", ps.Register(up), core.CodeInvalid},
		{"bad name", ps.Register(core.Pipeline{Name: "a.b", Run: up.Run}), core.CodeInvalid},
		{"no func", ps.Register(core.Pipeline{Name: "x"}), core.CodeInvalid},
		{"twice in one call", core.NewPipelines().Register(up, up), core.CodeInvalid},
		{"unknown", ps.Call(t.Context(), "nope", 1, nil), core.CodeNotFound},
		{"input misfit", ps.Call(t.Context(), "upper", 12, &out), core.CodeInvalid},
	} {
		if core.CodeOf(tc.err) != tc.code {
			t.Errorf("%s: err = %v, want %s", tc.name, tc.err, tc.code)
		}
	}
	if _, err := core.NewPipeline[int, int]("bad name!", "", nil); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("err %v", err)
	}
	if err := ps.Call(t.Context(), "fail", payload{}, nil); err == nil || err.Error() != "nope" {
		t.Fatalf("pipeline error not returned as is: %v", err)
	}
}

type addArgs struct {
	A int `json:"a" jsonschema:"first addend"`
	B int `json:"b"`
}

func addTool(t *testing.T) core.Tool {
	t.Helper()
	tool, err := core.NewTool("add", "adds two integers", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestTools(t *testing.T) {
	ts := core.NewTools()
	if err := ts.Register(addTool(t)); err != nil {
		t.Fatal(err)
	}
	if got, err := ts.Call(t.Context(), "add", json.RawMessage(`{"a":2,"b":3}`)); err != nil || got != "5" {
		t.Fatalf("got %q err %v", got, err)
	}
	for _, args := range []string{`{"a":2}`, `{"a":"x","b":1}`, `{"a":1,"b":2,"c":3}`, `[`} {
		if _, err := ts.Call(t.Context(), "add", json.RawMessage(args)); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("args %s: err %v, want invalid", args, err)
		}
	}
	if _, err := ts.Call(t.Context(), "sub", nil); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("err %v", err)
	}
	if err := ts.Register(addTool(t)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := ts.Register(core.Tool{Name: "x", Call: addTool(t).Call}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("no schema: %v", err)
	}
	if got := ts.Names(); len(got) != 1 || got[0] != "add" {
		t.Fatalf("names %v", got)
	}
}

func TestToolLoop(t *testing.T) {
	srv := llmtest.NewServer(t)
	ts := core.NewTools()
	if err := ts.Register(addTool(t)); err != nil {
		t.Fatal(err)
	}
	svc := &core.Services{LLM: provider(t, srv), Tools: ts}
	scope := svc.Scope("calc", core.Permissions{Services: []core.Service{core.ServiceLLM, core.ServiceTools}, Tools: []string{"add"}})

	srv.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":2,"b":3}`}}},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "add", Arguments: `{"a":"bad"}`}, {ID: "c3", Name: "rm", Arguments: `{}`}}},
		llmtest.Reply{Text: "the sum is 5"},
	)
	res, msgs, err := scope.RunTools(t.Context(), core.Prompt("", "2+3?"), []string{"add"}, 5)
	if err != nil || res.Text != "the sum is 5" {
		t.Fatalf("res %+v err %v", res, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Function.Name != "add" {
		t.Fatalf("requests %+v", reqs)
	}
	// The second request carries the assistant's call and the tool's result.
	m := reqs[1].Messages
	if len(m) != 3 || m[1].Role != "assistant" || len(m[1].ToolCalls) != 1 || m[1].ToolCalls[0].Function.Name != "add" ||
		m[2].Role != "tool" || m[2].ToolCallID != "c1" || m[2].Text() != "5" {
		t.Fatalf("second request messages %+v", m)
	}
	m = reqs[2].Messages
	if len(m) != 6 || !strings.HasPrefix(m[4].Text(), "error: ") || !strings.Contains(m[5].Text(), `no tool "rm"`) {
		t.Fatalf("third request messages %+v", m)
	}
	if len(msgs) != 7 || msgs[6].Content != "the sum is 5" {
		t.Fatalf("conversation %d messages", len(msgs))
	}

	// Step limit.
	call := llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "c", Name: "add", Arguments: `{"a":1,"b":1}`}}}
	srv.Enqueue(call, call, call)
	_, _, err = scope.RunTools(t.Context(), core.Prompt("", "loop"), []string{"add"}, 2)
	if !errors.Is(err, core.ErrSteps) {
		t.Fatalf("err = %v, want steps", err)
	}
	if _, _, err := scope.RunTools(t.Context(), core.Prompt("", "x"), []string{"add"}, 0); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("maxSteps 0: %v", err)
	}
}

func TestPermissions(t *testing.T) {
	srv := llmtest.NewServer(t)
	ps := core.NewPipelines()
	up, _ := core.NewPipeline("upper", "", func(_ context.Context, in string) (string, error) { return strings.ToUpper(in), nil })
	low, _ := core.NewPipeline("lower", "", func(_ context.Context, in string) (string, error) { return strings.ToLower(in), nil })
	if err := ps.Register(up, low); err != nil {
		t.Fatal(err)
	}
	ts := core.NewTools()
	if err := ts.Register(addTool(t)); err != nil {
		t.Fatal(err)
	}
	svc := &core.Services{LLM: provider(t, srv), Pipelines: ps, Tools: ts}
	none := svc.Scope("none", core.Permissions{})
	some := svc.Scope("some", core.Permissions{Services: []core.Service{core.ServicePipelines, core.ServiceTools, core.ServiceVector}, Pipelines: []string{"upper"}})
	all := svc.Scope("all", core.Permissions{Services: []core.Service{core.ServicePipelines, core.ServiceTools, core.ServiceLLM}, Pipelines: []string{"*"}, Tools: []string{"*"}})
	ctx := t.Context()
	var out string
	checks := []struct {
		name string
		err  error
		code core.Code
	}{
		{"llm denied", func() error { _, err := none.Generate(ctx, core.Prompt("", "x")); return err }(), core.CodePermission},
		{"embed denied", func() error { _, err := none.Embed(ctx, []string{"x"}); return err }(), core.CodePermission},
		{"stream denied", func() error {
			for _, err := range none.Stream(ctx, core.Prompt("", "x")) {
				return err
			}
			return nil
		}(), core.CodePermission},
		{"object denied", func() error { _, err := core.GenerateObject[payload](ctx, none, core.Prompt("", "x")); return err }(), core.CodePermission},
		{"pipelines denied", none.Pipeline(ctx, "upper", "a", &out), core.CodePermission},
		{"pipeline not listed", some.Pipeline(ctx, "lower", "a", &out), core.CodePermission},
		{"pipeline listed", some.Pipeline(ctx, "upper", "a", &out), ""},
		{"pipeline wildcard", all.Pipeline(ctx, "lower", "A", &out), ""},
		{"tool not listed", func() error { _, err := some.CallTool(ctx, "add", json.RawMessage(`{"a":1,"b":1}`)); return err }(), core.CodePermission},
		{"tool wildcard", func() error { _, err := all.CallTool(ctx, "add", json.RawMessage(`{"a":1,"b":1}`)); return err }(), ""},
		{"tool loop with a tool not allowed", func() error { _, _, err := some.RunTools(ctx, core.Prompt("", "x"), []string{"add"}, 3); return err }(), core.CodePermission},
		{"vector allowed but not configured", func() error { _, err := some.Search(ctx, "x", 1); return err }(), core.CodeUnavailable},
		{"vector denied", none.AddDocs(ctx, core.Doc{ID: "a"}), core.CodePermission},
		{"tool loop without llm", func() error { _, _, err := some.RunTools(ctx, core.Prompt("", "x"), nil, 3); return err }(), core.CodePermission},
	}
	for _, c := range checks {
		if got := core.CodeOf(c.err); got != c.code {
			t.Errorf("%s: err = %v, want code %q", c.name, c.err, c.code)
		}
	}
	if got := some.Pipelines(); len(got) != 1 || got[0].Name != "upper" {
		t.Fatalf("some.Pipelines() = %v", got)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("a denied call reached the provider")
	}
	if _, err := core.From(context.Background()); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("From without scope: %v", err)
	}
}

type count struct {
	N int `json:"n"`
}

// TestWrap runs a wrapped kind's logic (Kind.Apply, no NATS): the logic finds
// the services through its *actor.Context, and failures map onto the node's
// retry/dead-letter contract.
func TestWrap(t *testing.T) {
	ps := core.NewPipelines()
	inc, _ := core.NewPipeline("inc", "", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	if err := ps.Register(inc); err != nil {
		t.Fatal(err)
	}
	svc := &core.Services{Pipelines: ps}
	var calls atomic.Int32
	kind, err := core.Wrap(svc, core.Permissions{Services: []core.Service{core.ServicePipelines}, Pipelines: []string{"inc"}}, actor.Kind[count]{
		Name: "counter",
		Logic: func(ctx *actor.Context, s count) (count, error) {
			calls.Add(1)
			scope, err := core.From(ctx)
			if err != nil {
				return s, err
			}
			switch ctx.Record().Type {
			case "inc":
				err = scope.Pipeline(ctx, "inc", s.N, &s.N)
			case "forbidden":
				_, err = scope.Generate(ctx, core.Prompt("", "x"))
			case "flaky":
				err = errors.New("try again")
			case "panic":
				panic("boom")
			}
			return s, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	self := records.Ref{Kind: "counter", ID: "c1"}
	apply := func(typ string, s count) (count, error) {
		rec, err := records.New(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		next, _, err := kind.Apply(t.Context(), self, rec, s)
		return next, err
	}
	if s, err := apply("inc", count{N: 1}); err != nil || s.N != 2 {
		t.Fatalf("inc: %+v %v", s, err)
	}
	_, err = apply("forbidden", count{})
	if !errors.Is(err, core.ErrPermission) || !actor.IsPermanent(err) {
		t.Fatalf("forbidden: err %v, want a permanent permission error", err)
	}
	_, err = apply("flaky", count{})
	if !errors.Is(err, core.ErrFailed) || actor.IsPermanent(err) {
		t.Fatalf("flaky: err %v, want a retryable failed error", err)
	}
	_, err = apply("panic", count{})
	var pe *actor.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("panic: err %v, want the node's panic handling", err)
	}
	if _, err := core.Wrap(svc, core.Permissions{}, actor.Kind[count]{Name: "x"}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("no logic: %v", err)
	}
}
