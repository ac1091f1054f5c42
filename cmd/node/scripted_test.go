//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
)

// readmeAgentCommands are the bin/ea lines of the README's first sh block
// after "**The agent kinds.**": what a new user runs after make run.
func readmeAgentCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "**The agent kinds.**")
	if !ok {
		t.Fatal("README.md has no **The agent kinds.** section")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md's agent section has no sh block")
	}
	var out []string
	for line := range strings.SplitSeq(block, "\n") {
		if strings.HasPrefix(line, "bin/ea ") {
			out = append(out, line)
		}
	}
	if len(out) < 5 {
		t.Fatalf("README.md's agent block has %d bin/ea lines:\n%s", len(out), block)
	}
	return out
}

// TestScriptedModel runs ea-node and ea-supervisor as make run does with no
// model configured (EA_LLM_BASE_URL=scripted:), and the README's agent
// section to the letter with the ea binary: the writer streams a tagged
// answer in several chunks, the chat thread answers and remembers, research
// completes with the thread's answer, and the assistant's model calls the
// --tools services and answers with their results. Both binaries warn at
// start, and the node's banner names the scripted model.
func TestScriptedModel(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	supBinary, eaBinary := filepath.Join(dir, "bin", "ea-supervisor"), filepath.Join(dir, "bin", "ea")
	if err := proctest.Build(supBinary, "../supervisor"); err != nil {
		t.Fatal(err)
	}
	if err := proctest.Build(eaBinary, "../ea"); err != nil {
		t.Fatal(err)
	}
	srv := bustest.NewServer(t)
	weatherService(t, srv)
	tools := toolsFile(t, clockService(t))
	env := []string{"EA_LLM_BASE_URL=scripted:", "CLOCK_KEY=k1"}
	nodeMetrics, supMetrics := proctest.FreeAddr(t), proctest.FreeAddr(t)
	n := startProcess(t, "node", nodeMetrics, binary, env, "--nats", srv.URL, "--metrics", nodeMetrics, "--tools", tools)
	s := startProcess(t, "supervisor", supMetrics, supBinary, env, "--nats", srv.URL, "--metrics", supMetrics, "--gateway", "off")
	n.waitReady(t, 60*time.Second)
	s.waitReady(t, 60*time.Second)
	n.WaitOutput(t, 10*time.Second, "is ready")
	s.WaitOutput(t, 10*time.Second, "bin/ea orch start research")
	for _, p := range []*process{n, s} {
		if !strings.Contains(p.Stderr.String(), `level=WARN msg="the model is the built-in scripted one (--llm-base-url scripted:)`) {
			t.Errorf("%s logged no warning that the model is the scripted one:\n%s", p.Name, p.Stderr)
		}
	}
	if out := n.Stdout.String(); !strings.Contains(out, "model    scripted (built in: canned answers, not a language model)") ||
		!strings.Contains(out, "The agent kinds ask scripted (built in") {
		t.Errorf("the node's banner does not name the scripted model:\n%s", out)
	}

	ea := func(line string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(proctest.Environ("EA_"), "EA_NATS="+srv.URL)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", line, err, out.String(), errb.String())
		}
		return out.String()
	}
	outputs := map[string]string{}
	for _, line := range readmeAgentCommands(t) {
		if strings.Contains(line, "--follow") {
			continue // read below with --last
		}
		outputs[strings.Join(strings.Fields(line)[:3], " ")] = ea(line)
	}
	if out := outputs["bin/ea send chat/t1"]; !strings.Contains(out, `"assistant":"[scripted model] You said: \"Hello, I am Ada.\" (message 1 of this conversation)`) {
		t.Errorf("chat's turn:\n%s", out)
	}
	if out := outputs["bin/ea orch start"]; !strings.Contains(out, "COMPLETED") || !strings.Contains(out, `"final":"[scripted model] You said: \"why is the sky blue?\"`) {
		t.Errorf("research:\n%s", out)
	}
	// The writer's answer, as tail --follow shows it: several chunks, then
	// task.done.
	var tail string
	eventually(t, 30*time.Second, "the writer's task.done", func() bool {
		tail = ea("bin/ea tail outbox writer/w1 --last 100")
		return strings.Contains(tail, " task.done ")
	})
	if chunks := strings.Count(tail, " task.chunk "); chunks < 3 || !strings.Contains(tail, `{"text":"[scripted model]`) {
		t.Errorf("the writer streamed %d chunks:\n%s", chunks, tail)
	}

	// The assistant's model calls both --tools services.
	ea("bin/ea create assistant/a1")
	if out := ea(`bin/ea send assistant/a1 '{"input":"Paris"}' --type task --process s2 --wait`); !strings.Contains(out, `"completed":1`) {
		t.Errorf("assistant's task:\n%s", out)
	}
	tail = ea("bin/ea tail outbox assistant/a1 --last 100")
	for _, want := range []string{`{"text":"[scripted model]`, "21°C", "14:05", " task.done "} {
		if !strings.Contains(tail, want) {
			t.Errorf("the assistant's outbox does not say %q:\n%s", want, tail)
		}
	}

	for _, p := range []*process{n, s} {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, 30*time.Second); code != 0 {
			t.Errorf("%s: exit status %d after SIGTERM", p.Name, code)
		}
	}
}
