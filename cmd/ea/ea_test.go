package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// world is a running deployment: an embedded JetStream server, a node
// hosting the example kinds with the record store, and a supervisor with the
// demo orchestration, all in this process.
type world struct {
	url string
}

func startWorld(t *testing.T) *world {
	t.Helper()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	log := slog.New(slog.DiscardHandler)
	actortest.StartNode(t, conn, actor.Options{Logger: log}, kinds.Counter(), kinds.TaskA(), kinds.TaskB())

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	runStore(t, ctx, &wg, conn, log)
	sup, err := supervisor.New(conn, supervisor.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	def, err := demo.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Register(def); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := sup.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	actortest.Eventually(t, 30*time.Second, "supervisor ready", sup.Ready)
	return &world{url: srv.URL}
}

// runStore runs a record store server on conn until ctx ends, counted in
// wg.
func runStore(t *testing.T, ctx context.Context, wg *sync.WaitGroup, conn *bus.Conn, log *slog.Logger) {
	t.Helper()
	st, err := store.NewServer(ctx, conn, store.ServerOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := st.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("store server: %v", err)
		}
	})
}

// result is what one ea run printed and returned.
type result struct {
	out, err string
	code     int
}

// ea runs the CLI against w with args, stdin as its standard input.
func (w *world) ea(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return w.eaCtx(t, t.Context(), stdin, args...)
}

func (w *world) eaCtx(t *testing.T, ctx context.Context, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, args, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: w.getenv})
	return result{out: out.String(), err: errb.String(), code: code}
}

func (w *world) getenv(k string) string {
	switch k {
	case "EA_NATS":
		return w.url
	case "EA_TIMEOUT":
		return "10s"
	}
	return ""
}

// ok fails the test unless r succeeded.
func (r result) ok(t *testing.T, what string) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.out, r.err)
	}
	return r
}

// fails checks the exit status and that stderr says want.
func (r result) fails(t *testing.T, what string, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, code, r.out, r.err)
		return
	}
	if !strings.Contains(r.err, want) {
		t.Errorf("%s: stderr %q does not say %q", what, r.err, want)
	}
	if code != 0 && r.out != "" {
		t.Errorf("%s: failed but printed to stdout: %q", what, r.out)
	}
}

// jsonLines decodes every line of out.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var vs []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", line, err)
		}
		vs = append(vs, v)
	}
	return vs
}

func TestEffectorsEndToEnd(t *testing.T) {
	w := startWorld(t)

	r := w.ea(t, "", "create", "counter/c1").ok(t, "create")
	if !strings.Contains(r.out, "created counter/c1") || !strings.Contains(r.out, `{"count":0}`) {
		t.Errorf("create printed %q", r.out)
	}
	// The quick start: payload as an argument, headers as flags after it.
	r = w.ea(t, "", "send", "counter/c1", `{"by":2}`, "--type", "inc", "--wait").ok(t, "send --wait")
	if !strings.Contains(r.out, "applied") || !strings.Contains(r.out, `{"count":2}`) {
		t.Errorf("send --wait printed %q", r.out)
	}
	// The payload from stdin; --json; our own id, process and priority.
	r = w.ea(t, `{"by":3}`, "send", "counter/c1", "--type", "inc", "--json", "--id", "r-stdin", "--process", "p1", "--priority", "high").ok(t, "send from stdin")
	sent := jsonLines(t, r.out)
	if len(sent) != 1 || sent[0]["id"] != "r-stdin" || sent[0]["seq"] == nil {
		t.Fatalf("send --json printed %q", r.out)
	}
	var doc actor.Document
	actortest.Eventually(t, 10*time.Second, "counter/c1 at 5", func() bool {
		r := w.ea(t, "", "state", "counter/c1", "--json").ok(t, "state --json")
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatalf("state --json: %v: %q", err, r.out)
		}
		var s kinds.CounterState
		return doc.Decode(&s) == nil && s.Count == 5
	})
	if doc.Status != actor.StatusIdle || doc.Kind != "counter" || doc.ID != "c1" || doc.Seq == 0 {
		t.Errorf("state document %+v", doc)
	}
	// Global flags may come before the command, as in the nats CLI.
	r = w.ea(t, "", "--json", "--timeout", "5s", "state", "counter/c1").ok(t, "global flags first")
	if len(jsonLines(t, r.out)) != 1 {
		t.Errorf("ea --json state printed %q", r.out)
	}
	r = w.ea(t, "", "state", "counter/c1").ok(t, "state")
	for _, want := range []string{"counter/c1", "IDLE", `{"count":5}`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("state table %q lacks %q", r.out, want)
		}
	}
	// A record the counter refuses: a dead letter.
	w.ea(t, "", "send", "counter/c1", `{}`, "--type", "bogus", "--any-type").ok(t, "send bogus")
	w.ea(t, "", "create", "counter/c2", `{"count":10}`).ok(t, "create with state")

	// ls: both counters with their status; paging; JSON.
	actortest.Eventually(t, 10*time.Second, "ls shows both counters", func() bool {
		r := w.ea(t, "", "ls", "counter").ok(t, "ls")
		return strings.Contains(r.out, "c1") && strings.Contains(r.out, "c2") && strings.Contains(r.out, "IDLE") && strings.Contains(r.out, "2 effectors")
	})
	r = w.ea(t, "", "ls", "counter", "--limit", "1").ok(t, "ls --limit 1")
	if !strings.Contains(r.out, "more: ea ls counter --cursor ") {
		t.Fatalf("ls --limit 1 printed no next-page hint: %q", r.out)
	}
	cursor := strings.TrimSpace(r.out[strings.LastIndex(r.out, "--cursor ")+len("--cursor "):])
	r2 := w.ea(t, "", "ls", "counter", "--limit", "1", "--cursor", cursor).ok(t, "ls --cursor")
	if !strings.HasSuffix(r2.out, "\n1 effector\n") {
		t.Errorf("second page: %q", r2.out)
	}
	lines := jsonLines(t, w.ea(t, "", "ls", "counter", "--json", "--all").ok(t, "ls --json").out)
	if len(lines) != 3 || lines[2]["more"] != false {
		t.Errorf("ls --json --all: %v", lines)
	}
	r = w.ea(t, "", "ls", "counter", "--status", "error").ok(t, "ls --status")
	if !strings.Contains(r.out, "0 effectors") && !strings.Contains(r.out, "1 effector\n") {
		t.Errorf("ls --status error: %q", r.out)
	}

	// kinds: the node's.
	r = w.ea(t, "", "kinds").ok(t, "kinds")
	for _, k := range []string{"counter", "task-a", "task-b"} {
		if !strings.Contains(r.out, k) {
			t.Errorf("kinds %q lacks %s", r.out, k)
		}
	}

	// tail: outbox, mailbox, process, type, dead letters.
	actortest.Eventually(t, 10*time.Second, "tail outbox shows both counts", func() bool {
		r := w.ea(t, "", "tail", "outbox", "counter/c1").ok(t, "tail outbox")
		return strings.Count(r.out, " count ") == 2 && strings.Contains(r.out, `{"count":5}`)
	})
	r = w.ea(t, "", "tail", "mailbox", "counter/c1", "--last", "2").ok(t, "tail mailbox --last 2")
	if n := strings.Count(strings.TrimSpace(r.out), "\n") + 1; n != 2 || !strings.Contains(r.out, "bogus") || !strings.Contains(r.out, "priority=high") {
		t.Errorf("tail mailbox --last 2 (%d lines): %q", n, r.out)
	}
	actortest.Eventually(t, 10*time.Second, "tail process p1", func() bool {
		r := w.ea(t, "", "tail", "process", "p1", "--json").ok(t, "tail process")
		recs := jsonLines(t, r.out)
		// The record sent in p1, and the count it caused (outputs inherit the process).
		// The index gives mailbox and outbox records in the order it indexed them.
		boxes := map[any]any{}
		for _, r := range recs {
			boxes[r["box"]] = r["id"]
		}
		return len(recs) == 2 && boxes["mailbox"] == "r-stdin" && boxes["outbox"] != nil
	})
	r = w.ea(t, "", "tail", "mailbox", "counter/c1", "--from", "2").ok(t, "tail --from")
	if strings.Contains(r.out, " #1 ") || !strings.Contains(r.out, " #2 ") {
		t.Errorf("tail --from 2: %q", r.out)
	}
	r = w.ea(t, "", "tail", "effector", "counter/c1", "--since", "1h").ok(t, "tail --since")
	if strings.Count(r.out, "\n") != 5 { // 3 sent, 2 emitted
		t.Errorf("tail effector --since 1h: %q", r.out)
	}
	actortest.Eventually(t, 10*time.Second, "tail dead shows the bogus record", func() bool {
		r := w.ea(t, "", "tail", "dead", "counter").ok(t, "tail dead")
		return strings.Contains(r.out, "reason=rejected") && strings.Contains(r.out, "counter/c1")
	})
	dl := jsonLines(t, w.ea(t, "", "tail", "dead", "counter/c1", "--json").ok(t, "tail dead --json").out)
	if len(dl) != 1 || dl[0]["reason"] != "rejected" || dl[0]["type"] != "bogus" {
		t.Errorf("tail dead --json: %v", dl)
	}
	if r := w.ea(t, "", "tail", "dead", "counter/c2").ok(t, "tail dead, none"); r.out != "" {
		t.Errorf("tail dead of an effector without dead letters printed %q", r.out)
	}

	// tail --follow sees a record sent after it started, then ends cleanly on interrupt.
	ctx, cancel := context.WithCancel(t.Context())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"tail", "outbox", "counter/c2", "--follow", "--poll", "50ms"}, env{stdout: &out, stderr: io.Discard, getenv: w.getenv})
	}()
	time.Sleep(200 * time.Millisecond) // let it print the (empty) history first
	w.ea(t, "", "send", "counter/c2", `{"by":1}`, "--type", "inc").ok(t, "send while following")
	actortest.Eventually(t, 10*time.Second, "tail --follow prints the new count", func() bool {
		return strings.Contains(out.String(), `{"count":11}`)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("tail --follow interrupted: exit %d", code)
	}

	// terminate, then state says so; sending more goes to dead letters.
	r = w.ea(t, "", "terminate", "counter/c2").ok(t, "terminate")
	if !strings.Contains(r.out, "TERMINATED") {
		t.Errorf("terminate printed %q", r.out)
	}

	// top --once: per-kind counts and rates.
	// (the last acknowledgements may still be on their way: wait for them)
	var frame topFrame
	actortest.Eventually(t, 10*time.Second, "top --once shows counter's 4 records, 1 dead letter, no backlog", func() bool {
		r := w.ea(t, "", "top", "--once", "--interval", "100ms", "--json", "--kind", "counter").ok(t, "top --once --json")
		frame = topFrame{}
		if err := json.Unmarshal([]byte(r.out), &frame); err != nil {
			t.Fatalf("top --json: %v: %q", err, r.out)
		}
		return len(frame.Kinds) == 1 && frame.Kinds[0].Kind == "counter" && frame.Kinds[0].Records == 4 &&
			frame.Kinds[0].Dead == 1 && frame.Kinds[0].Nodes == 1 && frame.Kinds[0].Backlog == 0
	})
	// top refreshes until interrupted, then exits 0.
	tctx, tcancel := context.WithCancel(t.Context())
	var frames syncBuffer
	tdone := make(chan int, 1)
	go func() {
		tdone <- run(tctx, []string{"top", "--interval", "50ms", "--json"}, env{stdout: &frames, stderr: io.Discard, getenv: w.getenv})
	}()
	actortest.Eventually(t, 10*time.Second, "top prints three frames", func() bool {
		return strings.Count(frames.String(), "\n") >= 3
	})
	tcancel()
	if code := <-tdone; code != 0 {
		t.Errorf("top interrupted: exit %d", code)
	}
	for _, f := range jsonLines(t, frames.String()) {
		if f["kinds"] == nil {
			t.Errorf("top frame without kinds: %v", f)
		}
	}
	r = w.ea(t, "", "top", "--once", "--interval", "50ms").ok(t, "top --once")
	if !strings.Contains(r.out, "BACKLOG") || !strings.Contains(r.out, "task-a") {
		t.Errorf("top table: %q", r.out)
	}
}

func TestOrchestrationsEndToEnd(t *testing.T) {
	w := startWorld(t)
	r := w.ea(t, "", "orch", "start", "demo", `{"text":"hello world"}`, "--wait").ok(t, "orch start --wait")
	if !strings.Contains(r.out, "WAITING") || !strings.Contains(r.out, "input") {
		t.Fatalf("orch start --wait: %q", r.out)
	}
	id := strings.Fields(strings.SplitN(r.out, "\n", 2)[0])[1]
	r = w.ea(t, "", "orch", "status", id, "--json").ok(t, "orch status")
	var o supervisor.Orchestration
	if err := json.Unmarshal([]byte(r.out), &o); err != nil || o.ID != id || o.Status != supervisor.StatusWaiting {
		t.Fatalf("orch status --json: %v %+v", err, o)
	}
	r = w.ea(t, "", "orch", "input", id, `{"note":"from me"}`).ok(t, "orch input")
	if !strings.Contains(r.out, id) {
		t.Errorf("orch input printed %q", r.out)
	}
	actortest.Eventually(t, 20*time.Second, "orchestration completes", func() bool {
		return strings.Contains(w.ea(t, "", "orch", "status", id).ok(t, "status").out, "COMPLETED")
	})
	w.ea(t, "", "orch", "input", id, `{}`).fails(t, "input to a finished orchestration", exitConflict, "")
	w.ea(t, "", "orch", "cancel", id).fails(t, "cancel a finished orchestration", exitConflict, "")

	id2 := strings.TrimSpace(w.ea(t, "", "orch", "start", "demo", `{"text":"two"}`).ok(t, "start 2").out)
	w.ea(t, "", "orch", "cancel", id2).ok(t, "cancel")
	r = w.ea(t, "", "orch", "ls").ok(t, "orch ls")
	if !strings.Contains(r.out, id) || !strings.Contains(r.out, id2) || !strings.Contains(r.out, "CANCELLED") || !strings.Contains(r.out, "COMPLETED") {
		t.Errorf("orch ls: %q", r.out)
	}
	ls := jsonLines(t, w.ea(t, "", "orch", "ls", "--status", "completed", "--json").ok(t, "orch ls --status").out)
	if len(ls) != 1 || ls[0]["id"] != id {
		t.Errorf("orch ls --status completed: %v", ls)
	}
	// The orchestration's story in the log: its task records are in its process.
	actortest.Eventually(t, 10*time.Second, "tail process <orchestration>", func() bool {
		return strings.Contains(w.ea(t, "", "tail", "process", id).ok(t, "tail process").out, "task-a/")
	})

	w.ea(t, "", "orch", "status", "nope").fails(t, "status of an unknown id", exitNotFound, "unknown orchestration")
	w.ea(t, "", "orch", "start", "nope").fails(t, "start an unknown definition", exitNotFound, "nope")
	w.ea(t, "", "orch", "start", "demo", "{bad").fails(t, "start with bad JSON", exitUsage, "not valid JSON")
	w.ea(t, "", "orch").fails(t, "orch alone", exitUsage, "needs a subcommand")
	w.ea(t, "", "orch", "frob").fails(t, "orch frob", exitUsage, `unknown subcommand "frob"`)
	w.ea(t, "", "orch", "ls", "--status", "DONE").fails(t, "orch ls bad status", exitUsage, "--status")
}

// TestErrors runs every kind of bad input against a running deployment: each
// gets a clear message on stderr, nothing on stdout, and its exit status.
func TestErrors(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/x").ok(t, "create")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "no command given"},
		{"unknown command", []string{"frob"}, exitUsage, `unknown command "frob"`},
		{"command flag before the command", []string{"--type", "inc", "send", "counter/x"}, exitUsage, "--type before the command"},
		{"global flag without its value", []string{"--nats"}, exitUsage, "flag needs an argument: --nats"},
		{"global flags and no command", []string{"--json"}, exitUsage, "no command given after --json"},
		{"unknown flag", []string{"state", "counter/x", "--frob"}, exitUsage, "flag provided but not defined: -frob"},
		{"missing ref", []string{"state"}, exitUsage, "needs <kind>/<id>"},
		{"extra argument", []string{"state", "counter/x", "more"}, exitUsage, `unexpected argument "more"`},
		{"bad ref", []string{"state", "counter"}, exitUsage, "want <kind>/<id>"},
		{"bad id characters", []string{"send", "counter/a.b", "{}"}, exitUsage, "want <kind>/<id>"},
		{"bad JSON payload", []string{"send", "counter/x", "{by:2}"}, exitUsage, "the payload is not valid JSON"},
		{"bad priority", []string{"send", "counter/x", "{}", "--priority", "urgent"}, exitUsage, "--priority"},
		{"bad type header", []string{"send", "counter/x", "{}", "--type", "a b"}, exitUsage, "EA-Type"},
		{"wildcard reply subject", []string{"send", "counter/x", "{}", "--reply", "$JS.API.>"}, exitUsage, "EA-Reply"},
		{"forbidden reply subject", []string{"send", "counter/x", "{}", "--reply", "$JS.API.INFO"}, exitUsage, "--reply"},
		{"bad prefix", []string{"state", "counter/x", "--prefix", "a.b"}, exitUsage, "--prefix"},
		{"bad timeout", []string{"state", "counter/x", "--timeout", "soon"}, exitUsage, "timeout"},
		{"state of an unknown effector", []string{"state", "counter/nobody"}, exitNotFound, "not found"},
		{"terminate an unknown effector", []string{"terminate", "counter/nobody"}, exitNotFound, "not found"},
		{"create twice", []string{"create", "counter/x"}, exitConflict, "exists"},
		{"create of a kind no node hosts", []string{"create", "nokind/x"}, exitUnavailable, "no node hosts"},
		{"create with bad state", []string{"create", "counter/y", "[1"}, exitUsage, "not valid JSON"},
		{"ls bad kind", []string{"ls", "a.b"}, exitUsage, "kind"},
		{"ls unknown kind", []string{"ls", "nokind"}, exitNotFound, "unknown kind"},
		{"ls bad limit", []string{"ls", "counter", "--limit", "0"}, exitUsage, "--limit"},
		{"ls bad status", []string{"ls", "counter", "--status", "sleepy"}, exitUsage, "--status"},
		{"ls bad cursor", []string{"ls", "counter", "--cursor", "zzz"}, exitUsage, "cursor"},
		{"tail nothing", []string{"tail"}, exitUsage, "needs what to print"},
		{"tail bad source", []string{"tail", "inbox", "counter/x"}, exitUsage, `"inbox"`},
		{"tail bad since", []string{"tail", "outbox", "counter/x", "--since", "yesterday"}, exitUsage, "--since"},
		{"tail since and from", []string{"tail", "outbox", "counter/x", "--since", "1m", "--from", "3"}, exitUsage, "give one of them"},
		{"tail bad last", []string{"tail", "outbox", "counter/x", "--last", "-1"}, exitUsage, "--last"},
		{"tail dead bad kind", []string{"tail", "dead", "a.b"}, exitUsage, "kind"},
		{"top bad interval", []string{"top", "--interval", "1ns"}, exitUsage, "--interval"},
		{"completion fish", []string{"completion", "fish"}, exitUsage, "want bash or zsh"},
		{"help of nothing", []string{"help", "frob"}, exitUsage, `no command "frob"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.ea(t, "", c.args...).fails(t, strings.Join(c.args, " "), c.code, c.want)
		})
	}

	t.Run("NATS unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		var out, errb bytes.Buffer
		code := run(t.Context(), []string{"state", "counter/x", "--nats", "nats://" + addr, "--timeout", "500ms"}, env{stdout: &out, stderr: &errb})
		if code != exitUnavailable || !strings.Contains(errb.String(), "cannot reach NATS") {
			t.Errorf("exit %d, stderr %q", code, errb.String())
		}
	})
	t.Run("nothing serving", func(t *testing.T) {
		// A provisioned server with no node, store or supervisor on it.
		srv := bustest.NewServer(t)
		srv.Connect(t) // provisioned
		for _, args := range [][]string{{"orch", "status", "x"}, {"kinds"}, {"ls", "counter"}, {"tail", "outbox", "counter/x"}, {"create", "counter/x"}} {
			var out, errb bytes.Buffer
			code := run(t.Context(), append(args, "--nats", srv.URL, "--timeout", "1s"), env{stdout: &out, stderr: &errb})
			if code != exitUnavailable || !strings.HasPrefix(errb.String(), "ea: ") {
				t.Errorf("%v with nothing serving: exit %d, stderr %q", args, code, errb.String())
			}
			t.Logf("%v: %s", args, strings.TrimSpace(errb.String()))
		}
	})
}

func TestHelpAndCompletion(t *testing.T) {
	var out, errb bytes.Buffer
	e := env{stdout: &out, stderr: &errb}
	for _, args := range [][]string{{"--help"}, {"help"}, {"help", "send"}, {"send", "--help"}, {"help", "orch", "start"}, {"orch", "--help"}} {
		out.Reset()
		if code := run(t.Context(), args, e); code != 0 || out.Len() == 0 {
			t.Errorf("%v: exit %d, printed %d bytes", args, code, out.Len())
		}
	}
	out.Reset()
	run(t.Context(), []string{"help", "send"}, e)
	for _, want := range []string{"--type", "--process", "--cause", "--reply", "--priority", "--id"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ea help send lacks %s", want)
		}
	}
	out.Reset()
	if code := run(t.Context(), []string{"completion", "bash"}, e); code != 0 {
		t.Fatalf("completion bash: exit %d: %s", code, errb.String())
	}
	script := out.String()
	if !strings.Contains(script, "complete -F _ea ea") || !strings.Contains(script, "--follow") || !strings.Contains(script, "start") {
		t.Errorf("bash completion: %q", script)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		// The script parses, and completes "ea orch st" to start and status.
		cmd := exec.Command(bash, "-c", script+"\nCOMP_WORDS=(ea orch st); COMP_CWORD=2; _ea; echo \"${COMPREPLY[@]}\"")
		got, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != "start status" {
			t.Errorf("bash completion of 'ea orch st': %v: %q", err, got)
		}
	}
	out.Reset()
	if code := run(t.Context(), []string{"completion", "zsh"}, e); code != 0 || !strings.Contains(out.String(), "compdef _ea ea") {
		t.Errorf("completion zsh: exit %d: %q", code, out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
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

// TestSendWaitDeadLetter: send --wait tells a record the runtime sent to
// dead letters from one it applied, on what the runtime wrote (the dead
// letter stream), and says why with exit status 6; a good record sent after
// it is applied, not taken for the earlier dead letter.
func TestSendWaitDeadLetter(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/d1").ok(t, "create")
	r := w.ea(t, "", "send", "counter/d1", `{"by":"x"}`, "--type", "inc", "--wait", "--id", "bad-1")
	t.Logf("send --wait of a bad payload: %s", strings.TrimSpace(r.err))
	if r.code != exitDead || r.out != "" {
		t.Fatalf("send --wait of a bad payload: exit %d, stdout %q, stderr %q; want 6 and nothing on stdout", r.code, r.out, r.err)
	}
	for _, want := range []string{"bad-1", "dead letters", "reason ", "ea tail dead counter/d1"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr %q does not say %q", r.err, want)
		}
	}
	if strings.Contains(r.out+r.err, "applied") {
		t.Errorf("a dead letter said applied: %q %q", r.out, r.err)
	}
	// Sent again with the same id: JetStream keeps the first (a duplicate),
	// which was dead-lettered before this send.
	r = w.ea(t, "", "send", "counter/d1", `{"by":"x"}`, "--type", "inc", "--wait", "--id", "bad-1")
	if r.code != exitDead || !strings.Contains(r.err, "reason decode") {
		t.Errorf("send --wait of a duplicate of a dead-lettered record: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	r = w.ea(t, "", "send", "counter/d1", `{"by":2}`, "--type", "inc", "--wait").ok(t, "send --wait after a dead letter")
	if !strings.Contains(r.out, "applied") || !strings.Contains(r.out, `{"count":2}`) {
		t.Errorf("send --wait printed %q", r.out)
	}
	// Refused by type: the same, with its reason.
	r = w.ea(t, "", "send", "counter/d1", `{}`, "--type", "bogus", "--any-type", "--wait")
	if r.code != exitDead || !strings.Contains(r.err, "bogus") {
		t.Errorf("send --wait of an unknown type: exit %d, stderr %q", r.code, r.err)
	}
}

// TestDeadReplay: ea dead replay sends a dead letter's record again to its
// mailbox as a new record (new id, EA-Cause the original's id, the same
// type, process and payload), found by the original's id or by the dead
// letter's sequence; --wait says what became of it.
func TestDeadReplay(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/r1").ok(t, "create")
	if r := w.ea(t, "", "send", "counter/r1", `{"n":1}`, "--type", "bogus", "--any-type", "--id", "orig-1", "--process", "p9", "--wait"); r.code != exitDead {
		t.Fatalf("send bogus --wait: exit %d, %s", r.code, r.err)
	}
	r := w.ea(t, "", "dead", "replay", "orig-1", "--json").ok(t, "dead replay <id>")
	sent := jsonLines(t, r.out)
	if len(sent) != 1 || sent[0]["cause"] != "orig-1" || sent[0]["id"] == "orig-1" || sent[0]["type"] != "bogus" {
		t.Fatalf("dead replay --json printed %q", r.out)
	}
	newID := sent[0]["id"]
	var replayed map[string]any
	actortest.Eventually(t, 10*time.Second, "the replayed record in counter/r1's mailbox", func() bool {
		for _, rec := range jsonLines(t, w.ea(t, "", "tail", "mailbox", "counter/r1", "--json").ok(t, "tail mailbox").out) {
			if rec["id"] == newID {
				replayed = rec
				return true
			}
		}
		return false
	})
	if replayed["cause"] != "orig-1" || replayed["process"] != "p9" || replayed["type"] != "bogus" || fmt.Sprint(replayed["json"]) != "map[n:1]" {
		t.Errorf("replayed record %v", replayed)
	}
	// The counter refuses it again: a second dead letter, found by its
	// sequence this time, replayed with --wait.
	var deadSeq any
	actortest.Eventually(t, 10*time.Second, "two dead letters", func() bool {
		dl := jsonLines(t, w.ea(t, "", "tail", "dead", "counter/r1", "--json").ok(t, "tail dead").out)
		if len(dl) == 2 {
			deadSeq = dl[1]["dead_seq"]
		}
		return len(dl) == 2
	})
	r = w.ea(t, "", "dead", "replay", "--seq", fmt.Sprint(deadSeq), "--wait")
	if r.code != exitDead || !strings.Contains(r.err, "reason rejected") {
		t.Errorf("dead replay --seq --wait: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	// The dead letter's own id, as tail dead prints it (id=dead:<id>), and
	// --effector narrowing the search.
	r = w.ea(t, "", "dead", "replay", "dead:orig-1", "--effector", "counter/r1").ok(t, "dead replay dead:<id>")
	if !strings.Contains(r.out, "replayed dead letter #1 (reason rejected) to counter/r1") || !strings.Contains(r.out, "cause orig-1") {
		t.Errorf("dead replay dead:orig-1 printed %q", r.out)
	}
	w.ea(t, "", "dead", "replay", "nope", "--effector", "counter").fails(t, "replay of an unknown id", exitNotFound, "no dead letter of record nope")
	w.ea(t, "", "dead", "replay", "--seq", "999").fails(t, "replay of an unknown seq", exitNotFound, "no dead letter at EA_DEAD #999")
	w.ea(t, "", "dead", "replay").fails(t, "replay of nothing", exitUsage, "give the dead-lettered record's id or --seq")
}
