//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/effectors/effectors/examples/demo"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go/jetstream"
)

// TestCrashResume kills a real ea-supervisor process with SIGKILL while an
// orchestration has a task out, lets the worker answer while no supervisor
// runs, starts a new process and sees the orchestration complete with exact
// results, each task sent once.
func TestCrashResume(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	c, err := supervisor.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	workers := startWorkers(t, conn)
	first := startSupervisor(t, "first", srv.URL)
	first.waitReady(t, 60*time.Second)
	actortest.Eventually(t, 10*time.Second, "the hint of how to start the demo", func() bool {
		out := first.Stdout.String()
		return strings.Contains(out, "nats req ea.orch.start") && strings.Contains(out, `"name":"demo"`) &&
			strings.Contains(out, "nats req ea.orch.input") &&
			strings.Contains(out, `bin/ea orch start demo '{"text":"hello world"}' --wait`) &&
			strings.Contains(out, "bin/ea orch input <ID>")
	})

	id, err := c.Start(ctx, "demo", demo.Input{Text: "crash test"})
	if err != nil {
		t.Fatal(err)
	}
	o := waitStatus(t, c, id, supervisor.StatusWaiting)
	if o.Step != "ask" {
		t.Fatalf("waiting in %q", o.Step)
	}
	// Stop the workers so that task B stays out, give the input, and kill
	// the supervisor while the orchestration waits for task B.
	workers.Stop(t)
	if st, err := c.Input(ctx, id, demo.Note{Note: "after the crash"}); err != nil || st != supervisor.StatusRunning {
		t.Fatalf("input: %s %v", st, err)
	}
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := first.Wait(t, 30*time.Second); code != -1 {
		t.Fatalf("exit code after SIGKILL = %d, want -1 (killed)", code)
	}
	// The server may still hold the killed process's subscription for a
	// moment after the process is gone (it has not read the closed
	// socket yet), and a request it delivers there is never answered: ask
	// with a short timeout until nobody is subscribed.
	actortest.Eventually(t, 30*time.Second, "status with no supervisor to fail with ErrUnavailable", func() bool {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.Status(callCtx, id)
		if !errors.Is(err, supervisor.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("status with no supervisor: %v, want ErrUnavailable", err)
		}
		return errors.Is(err, supervisor.ErrUnavailable)
	})

	// Task B is answered while no supervisor runs: the result waits in the
	// supervisor's mailbox.
	startWorkers(t, conn)
	mailbox := "ea.mbox.supervisor." + id
	actortest.Eventually(t, 30*time.Second, "task B's result in the supervisor's mailbox", func() bool {
		return countRecords(t, ctx, conn, mailbox) == 2
	})

	second := startSupervisor(t, "second", srv.URL)
	second.waitReady(t, 60*time.Second)
	o = waitStatus(t, c, id, supervisor.StatusCompleted)
	var r demo.Results
	if err := json.Unmarshal(o.Results, &r); err != nil {
		t.Fatal(err)
	}
	if r.A != "CRASH TEST" || r.Note != "after the crash" || r.B != "crash the after TEST CRASH" || r.Attempts != 1 || o.Steps != 4 {
		t.Fatalf("after restart: %+v, results %+v", o, r)
	}
	for _, w := range []string{"task-a", "task-b"} {
		if n := countRecords(t, ctx, conn, "ea.mbox."+w+".demo"); n != 1 {
			t.Fatalf("%d records in %s's mailbox, want 1", n, w)
		}
	}
	code, body := proctest.Get("http://" + second.metrics + "/metrics")
	if code != 200 || !strings.Contains(body, `ea_orchestrations_finished_total{name="demo",status="COMPLETED"} 1`) {
		t.Fatalf("metrics of the second process (%d) lack the completion:\n%s", code, grepLines(body, "ea_orch"))
	}

	if err := second.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := second.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit status after SIGTERM = %d, want 0", code)
	}
}

// TestBadUsage checks the exit status and message of a bad flag.
func TestBadUsage(t *testing.T) {
	p := startProcess(t, "bad", "", "--log-level", "loud")
	if code := p.Wait(t, 30*time.Second); code != 2 {
		t.Fatalf("exit status %d, want 2", code)
	}
	if !strings.Contains(p.Stderr.String(), `--log-level "loud": want debug, info, warn or error`) {
		t.Fatalf("stderr: %s", p.Stderr)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// countRecords counts the records stored on subject.
func countRecords(t testing.TB, ctx context.Context, conn *bus.Conn, subject string) uint64 {
	t.Helper()
	name, subject, ok := conn.Names().Stored(subject)
	if !ok {
		t.Fatalf("%s is not a mailbox, outbox or dead-letter subject", subject)
	}
	stream, err := conn.JetStream().Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// startWorkers runs an in-process node hosting the task kinds.
func startWorkers(t testing.TB, conn *bus.Conn) *actortest.Node {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return actortest.StartNode(t, conn, actor.Options{ShutdownGrace: 5 * time.Second, Logger: quiet}, kinds.TaskA(), kinds.TaskB())
}

func waitStatus(t testing.TB, c *supervisor.Client, id string, want supervisor.Status) supervisor.Orchestration {
	t.Helper()
	var o supervisor.Orchestration
	actortest.Eventually(t, 60*time.Second, "orchestration "+string(want), func() bool {
		var err error
		o, err = c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != want && o.Status.Final() {
			t.Fatalf("orchestration is %s (%q), want %s", o.Status, o.Error, want)
		}
		return o.Status == want
	})
	return o
}

// process is an ea-supervisor child process with its --metrics address.
type process struct {
	*proctest.Proc
	metrics string
}

func startSupervisor(t testing.TB, name, url string) *process {
	t.Helper()
	metrics := proctest.FreeAddr(t)
	return startProcess(t, name, metrics, "--nats", url, "--metrics", metrics, "--gateway", proctest.FreeAddr(t))
}

// startProcess starts the ea-supervisor binary with args and no inherited
// EA_* variable; it is killed at cleanup if still running.
func startProcess(t testing.TB, name, metrics string, args ...string) *process {
	t.Helper()
	return &process{Proc: proctest.Start(t, name, binary, args, proctest.Environ("EA_")), metrics: metrics}
}

func (p *process) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.WaitHTTP(t, timeout, "http://"+p.metrics+"/readyz")
}
