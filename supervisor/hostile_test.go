package supervisor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go"
)

// askState is the state of the "ask" orchestration: it waits for a number
// as input, then completes with it.
type askState struct {
	Topic  string `json:"topic"`
	Answer int    `json:"answer"`
}

func askDefinition(t *testing.T) supervisor.Definition {
	t.Helper()
	b := graph.New[askState]()
	b.AddNode("ask", func(ctx context.Context, s askState) (graph.Update[askState], error) {
		var n int
		if err := supervisor.AwaitInput(ctx, "a number", &n); err != nil {
			return graph.Update[askState]{}, err
		}
		s.Answer = n
		return graph.Replace(s), nil
	})
	b.AddEdge(graph.START, "ask").AddEdge("ask", graph.END)
	def, err := supervisor.Define(supervisor.Spec[askState]{Name: "ask", Graph: b})
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestHostileAPI is the hostile-input suite of the orchestration API, on one
// server and one supervisor: every request gets the exact code, reason and
// a part of the text; a refused request starts or changes nothing; the
// supervisor still serves other orchestrations afterwards.
func TestHostileAPI(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	s, err := supervisor.New(conn, supervisor.Options{Logger: quiet, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(askDefinition(t)); err != nil {
		t.Fatal(err)
	}
	background(t, s.Run, s.Ready, "supervisor")
	c := newClient(t, conn)
	ctx := ctxT(t)

	started := 0
	start := func(t *testing.T) string {
		t.Helper()
		id, err := c.Start(ctx, "ask", askState{Topic: "x"})
		if err != nil {
			t.Fatal(err)
		}
		started++
		waitStatus(t, c, id, supervisor.StatusWaiting)
		return id
	}
	probe := start(t) // waits throughout: the supervisor still serves it
	done := start(t)
	if _, err := c.Input(ctx, done, 7); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, done, supervisor.StatusCompleted)
	cancelled := start(t)
	if err := c.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	waiting := start(t)

	long := func(n int) string { return strings.Repeat("x", n) }
	deep := strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001)
	cases := []struct {
		name, op, body string
		code, reason   string // "" code: success
		text           []string
	}{
		{"start: empty body", "start", ``, "400", "invalid", []string{"bad request body: empty"}},
		{"start: null", "start", `null`, "400", "invalid", []string{"not a JSON object"}},
		{"start: an array", "start", `[{"name":"ask"}]`, "400", "invalid", []string{"not a JSON object"}},
		{"start: unknown field", "start", `{"name":"ask","colour":"x"}`, "400", "invalid", []string{`unknown field "colour"`}},
		{"start: Name", "start", `{"Name":"ask"}`, "400", "invalid", []string{`unknown field "Name": field names are case-sensitive ("name")`}},
		{"start: name twice", "start", `{"name":"ask","name":"demo"}`, "400", "invalid", []string{`field "name" given twice`}},
		{"start: two objects", "start", `{"name":"ask"}{"name":"ask"}`, "400", "invalid", []string{"data after the JSON object"}},
		{"start: truncated", "start", `{"name":"ask","input":{"topic":`, "400", "invalid", []string{"unexpected EOF"}},
		{"start: name a number", "start", `{"name":1}`, "400", "invalid", []string{"cannot unmarshal number"}},
		{"start: empty name", "start", `{"name":""}`, "400", "invalid", []string{"empty orchestration name"}},
		{"start: no name", "start", `{"input":{}}`, "400", "invalid", []string{"empty orchestration name"}},
		{"start: name with a dot", "start", `{"name":"a.b"}`, "400", "invalid", []string{`orchestration name "a.b"`, "[A-Za-z0-9_-]"}},
		{"start: name with a wildcard", "start", `{"name":"*"}`, "400", "invalid", []string{`"*"`}},
		{"start: name 129 bytes", "start", `{"name":"` + long(129) + `"}`, "400", "invalid", []string{"(129 bytes)", "1-128"}},
		{"start: unknown name", "start", `{"name":"nope"}`, "404", "unknown_name", []string{`no orchestration definition by that name "nope": this supervisor runs ask`}},
		{"start: input of the wrong type", "start", `{"name":"ask","input":{"topic":5}}`, "400", "invalid", []string{"topic"}},
		{"start: input 10,001 deep", "start", `{"name":"ask","input":` + deep + `}`, "400", "invalid", []string{"exceeded max depth"}},
		{"start: body 600 KB", "start", `{"name":"ask","input":{"topic":"` + long(600_000) + `"}}`, "400", "invalid", []string{"request body is 6000", "at most 524288"}},
		{"start: invalid UTF-8 name", "start", "{\"name\":\"\xff\"}", "400", "invalid", []string{"orchestration name"}},
		{"status: empty id", "status", `{"id":""}`, "400", "invalid", []string{"empty orchestration id"}},
		{"status: no id", "status", `{}`, "400", "invalid", []string{"empty orchestration id"}},
		{"status: id with a dot", "status", `{"id":"a.b"}`, "400", "invalid", []string{`orchestration id "a.b"`}},
		{"status: id >", "status", `{"id":">"}`, "400", "invalid", []string{`orchestration id ">"`}},
		{"status: id 129 bytes", "status", `{"id":"` + long(129) + `"}`, "400", "invalid", []string{"(129 bytes)"}},
		{"status: id 1 MB", "status", `{"id":"` + long(1_000_000) + `"}`, "400", "invalid", []string{"request body is 1000009 bytes", "at most 524288"}},
		{"status: id 400 KB", "status", `{"id":"` + long(400_000) + `"}`, "400", "invalid", []string{"(400000 bytes)"}},
		{"status: id a number", "status", `{"id":7}`, "400", "invalid", []string{"cannot unmarshal number"}},
		{"status: input given", "status", `{"id":"` + probe + `","input":1}`, "400", "invalid", []string{`unknown field "input"`}},
		{"status: unknown id", "status", `{"id":"nope"}`, "404", "unknown_orchestration", []string{`unknown orchestration "nope"`}},
		{"status: id twice", "status", `{"id":"nope","id":"` + probe + `"}`, "400", "invalid", []string{`field "id" given twice`}},
		{"input: unknown id", "input", `{"id":"nope","input":1}`, "404", "unknown_orchestration", []string{"nope"}},
		{"input: of the wrong type", "input", `{"id":"` + waiting + `","input":"seven"}`, "400", "invalid", []string{"bad input", "does not fit"}},
		{"input: not JSON", "input", `{"id":"` + waiting + `","input":sev}`, "400", "invalid", []string{"invalid character"}},
		{"input: to a completed one", "input", `{"id":"` + done + `","input":1}`, "410", "finished", []string{"orchestration already finished", "COMPLETED"}},
		{"input: to a cancelled one", "input", `{"id":"` + cancelled + `","input":1}`, "410", "finished", []string{"CANCELLED"}},
		{"input: unknown field", "input", `{"id":"` + waiting + `","inputs":1}`, "400", "invalid", []string{`unknown field "inputs"`}},
		{"cancel: an array", "cancel", `["` + waiting + `"]`, "400", "invalid", []string{"not a JSON object"}},
		{"cancel: unknown id", "cancel", `{"id":"nope"}`, "404", "unknown_orchestration", []string{"nope"}},
		{"cancel: a completed one", "cancel", `{"id":"` + done + `"}`, "410", "finished", []string{"COMPLETED"}},
		{"cancel: a cancelled one", "cancel", `{"id":"` + cancelled + `"}`, "410", "finished", []string{"CANCELLED"}},
		{"cancel: trailing data", "cancel", `{"id":"` + waiting + `"},`, "400", "invalid", []string{"data after the JSON object"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := conn.NATS().Request(conn.Names().Orch(tc.op), []byte(tc.body), 10*time.Second)
			if err != nil {
				t.Fatalf("no reply: %v", err)
			}
			code, reason, text := msg.Header.Get("Nats-Service-Error-Code"), msg.Header.Get("EA-Error-Reason"), msg.Header.Get("Nats-Service-Error")
			if code != tc.code || reason != tc.reason {
				t.Fatalf("code %q reason %q (%.300s), want %q %q", code, reason, text, tc.code, tc.reason)
			}
			if len(text) > 1100 || strings.Contains(text, long(65)) {
				t.Fatalf("error text of %d bytes echoes the request: %.200s", len(text), text)
			}
			for _, part := range tc.text {
				if !strings.Contains(text, part) {
					t.Errorf("error %.400q does not say %q", text, part)
				}
			}
			// Nothing changed; the supervisor still serves the others.
			for id, want := range map[string]supervisor.Status{probe: supervisor.StatusWaiting, waiting: supervisor.StatusWaiting, done: supervisor.StatusCompleted, cancelled: supervisor.StatusCancelled} {
				if o, err := c.Status(ctx, id); err != nil || o.Status != want {
					t.Fatalf("%s: %s %v, want %s", id, o.Status, err, want)
				}
			}
		})
	}

	// An operation nobody serves: no responders, not a hang.
	if _, err := conn.NATS().Request(conn.Names().Orch("delete"), []byte(`{"id":"x"}`), 10*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("ea.orch.delete: %v, want no responders", err)
	}

	// The Go client turns codes and reasons into the typed errors, one each.
	all := []error{supervisor.ErrInvalid, supervisor.ErrUnknownOrchestration, supervisor.ErrUnknownName, supervisor.ErrNotWaiting, supervisor.ErrConflict, supervisor.ErrFinished, supervisor.ErrUnavailable}
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"start unknown name", func() error { _, err := c.Start(ctx, "nope", nil); return err }, supervisor.ErrUnknownName},
		{"status unknown id", func() error { _, err := c.Status(ctx, "nope"); return err }, supervisor.ErrUnknownOrchestration},
		{"input of the wrong type", func() error { _, err := c.Input(ctx, waiting, "seven"); return err }, supervisor.ErrInvalid},
		{"input to a completed one", func() error { _, err := c.Input(ctx, done, 1); return err }, supervisor.ErrFinished},
		{"cancel a cancelled one", func() error { return c.Cancel(ctx, cancelled) }, supervisor.ErrFinished},
	} {
		err := tc.call()
		var ae *supervisor.APIError
		if !errors.As(err, &ae) || ae.Reason == "" {
			t.Errorf("%s: %v, want an *APIError with a reason", tc.name, err)
		}
		for _, s := range all {
			if errors.Is(err, s) != (s == tc.want) {
				t.Errorf("%s: errors.Is(%v, %v) = %v", tc.name, err, s, !(s == tc.want))
			}
		}
	}

	// Nothing started by a refused request: the orchestration bucket holds
	// the ones started here, no more.
	if got := orchKeys(t, conn); got != started {
		t.Errorf("%d orchestrations stored, want %d", got, started)
	}
	// And the waiting ones still take their input.
	for _, id := range []string{probe, waiting} {
		if _, err := c.Input(ctx, id, 42); err != nil {
			t.Fatal(err)
		}
		if o := waitStatus(t, c, id, supervisor.StatusCompleted); !strings.Contains(string(o.Results), `"answer":42`) {
			t.Fatalf("%s results %s", id, o.Results)
		}
	}
}

// orchKeys counts the orchestrations stored.
func orchKeys(t *testing.T, conn *bus.Conn) int {
	t.Helper()
	kv, err := conn.JetStream().KeyValue(ctxT(t), conn.Names().OrchBucket())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range keys.Keys() {
		if !strings.Contains(k, ".") { // graph checkpoints live under <id>.…
			n++
		}
	}
	return n
}
