//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// The load of the restart tests: incs spread round-robin over counters.
const (
	loadCounters = 20
	loadRecords  = 20_000
	loadBurst    = 5_000                 // published at once first, so the node has a backlog
	loadBatch    = 250                   // published, then acknowledged, at a time
	loadPace     = 40 * time.Millisecond // pause between batches after the burst: publishing lasts seconds
	stopAfter    = 1_000                 // outputs seen before the node is stopped
)

// TestRestartUnderLoadSIGTERM stops a node with SIGTERM while records are
// being published to and processed by 20 counters, restarts it and checks
// that every counter applied every record exactly once and emitted exactly
// one output for each.
func TestRestartUnderLoadSIGTERM(t *testing.T) { restartUnderLoad(t, syscall.SIGTERM) }

// TestRestartUnderLoadSIGKILL is TestRestartUnderLoadSIGTERM with kill -9.
func TestRestartUnderLoadSIGKILL(t *testing.T) { restartUnderLoad(t, syscall.SIGKILL) }

func restartUnderLoad(t *testing.T, sig syscall.Signal) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	stream, err := conn.OutboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const grace = 8 * time.Second
	start := func(name string) *process {
		metrics := proctest.FreeAddr(t)
		p := startNode(t, name, metrics,
			"--nats", srv.URL, "--metrics", metrics, "--store", t.TempDir(), "--shutdown-grace", grace.String())
		p.waitReady(t, 30*time.Second)
		return p
	}

	t0 := time.Now()
	first := start("first")
	ids := make([]string, loadCounters)
	for i := range ids {
		ids[i] = fmt.Sprint("c", i)
		createEffector(t, conn.NATS(), "ea", "counter", ids[i])
	}
	want := make(map[string]int64, len(ids))
	for i := range loadRecords {
		want[ids[i%len(ids)]]++
	}

	var published atomic.Int64
	pubErr := make(chan error, 1)
	go func() { pubErr <- publishIncs(ctx, conn.JetStream(), ids, loadRecords, &published) }()

	var seen int
	eventually(t, 60*time.Second, fmt.Sprintf("%d outputs from the first node", stopAfter), func() bool {
		if !first.Running() {
			t.Fatalf("first node exited under load: %v", first.Err())
		}
		seen = outputs(t, ctx, stream)
		return seen >= stopAfter
	})
	atStop := published.Load()
	stopped := time.Now()
	if err := first.Signal(sig); err != nil {
		t.Fatal(err)
	}
	code := first.Wait(t, grace+15*time.Second)
	took := time.Since(stopped)
	t.Logf("%s sent %s after start with %d of %d records published and %d outputs seen; exited with %d after %s",
		sig, stopped.Sub(t0).Round(time.Millisecond), atStop, loadRecords, seen, code, took.Round(time.Millisecond))
	if atStop == loadRecords || int(atStop) <= seen+len(ids) {
		t.Logf("note: publishing had finished or the node had caught up when it was stopped")
	}
	if sig == syscall.SIGTERM {
		if code != 0 {
			t.Errorf("exit status after SIGTERM = %d, want 0", code)
		}
		if took > grace {
			t.Errorf("exit took %s after SIGTERM, more than the shutdown grace %s", took, grace)
		}
	}

	select {
	case err := <-pubErr:
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("publishing did not finish within 60s (%d published)", published.Load())
	}

	second := start("second")
	eventually(t, 90*time.Second, "every counter to reach its count", func() bool {
		done := true
		for _, id := range ids {
			d, err := proctest.ReadState(ctx, bucket, "counter."+id)
			if err != nil {
				t.Fatalf("state of counter/%s: %v", id, err)
			}
			switch c := d.Count(); {
			case c > want[id]:
				t.Fatalf("counter/%s counted %d, more than the %d records sent: a record was applied twice", id, c, want[id])
			case c < want[id]:
				done = false
			}
		}
		return done
	})
	t.Logf("all %d counters exact %s after start", len(ids), time.Since(t0).Round(time.Millisecond))
	for _, id := range ids {
		d, err := proctest.ReadState(ctx, bucket, "counter."+id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != "IDLE" || d.Error != "" {
			t.Errorf("counter/%s: status %s error %q, want IDLE and no error", id, d.Status, d.Error)
		}
	}
	checkOutboxes(t, ctx, conn.JetStream(), stream, ids, want)
	checkNoDeadLetters(t, ctx, conn.JetStream())
	logRuntimeMetrics(t, second)

	if err := second.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := second.Wait(t, grace+15*time.Second); code != 0 {
		t.Errorf("second node: exit status after SIGTERM = %d, want 0", code)
	}
}

// incMsg is the i-th inc record of the load, for counter id: JSON, with a
// record id of our own so that a retried publish is a duplicate.
func incMsg(id string, i int) *nats.Msg {
	msg := nats.NewMsg("ea.mbox.counter." + id)
	msg.Header.Set("Nats-Msg-Id", fmt.Sprintf("in-%s-%d", id, i))
	msg.Header.Set("EA-Type", "inc")
	msg.Header.Set("Content-Type", "application/json")
	if i%2 == 0 { // half say by how much, half rely on the default of 1
		msg.Data = []byte(`{"by":1}`)
	}
	return msg
}

// publishIncs publishes total incs round-robin to ids in batches, each
// acknowledged by the stream before the next, counting them in published:
// the first loadBurst at once, the rest paced.
func publishIncs(ctx context.Context, js jetstream.JetStream, ids []string, total int, published *atomic.Int64) error {
	for first := 0; first < total; first += loadBatch {
		var futures []jetstream.PubAckFuture
		for i := first; i < min(first+loadBatch, total); i++ {
			f, err := js.PublishMsgAsync(incMsg(ids[i%len(ids)], i))
			if err != nil {
				return err
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				// The record id makes a retry of a stored record a duplicate.
				if _, rerr := js.PublishMsg(ctx, f.Msg(), jetstream.WithRetryAttempts(10)); rerr != nil {
					return fmt.Errorf("publish %s: %w (first attempt: %v)", f.Msg().Header.Get("Nats-Msg-Id"), rerr, err)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if published.Add(int64(len(futures))) < loadBurst {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(loadPace):
		}
	}
	return nil
}

// outputs counts the records on the counters' outboxes.
func outputs(t testing.TB, ctx context.Context, stream jetstream.Stream) int {
	t.Helper()
	n := 0
	for _, c := range subjectCounts(t, ctx, stream, "ea.out.counter.>") {
		n += int(c)
	}
	return n
}

func subjectCounts(t testing.TB, ctx context.Context, stream jetstream.Stream, filter string) map[string]uint64 {
	t.Helper()
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Subjects
}

// checkOutboxes checks that each counter's outbox holds exactly want[id]
// records, with no record id twice, each caused by one of our inc records
// (id <inc id>:0) and carrying the counts 1..want[id] once each.
func checkOutboxes(t testing.TB, ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, ids []string, want map[string]int64) {
	t.Helper()
	counts := subjectCounts(t, ctx, stream, "ea.out.counter.>")
	total := 0
	for _, id := range ids {
		if got := int64(counts["ea.out.counter."+id]); got != want[id] {
			t.Errorf("outbox of counter/%s holds %d records, want %d", id, got, want[id])
		}
		total += int(counts["ea.out.counter."+id])
	}
	cons, err := js.OrderedConsumer(ctx, stream.CachedInfo().Config.Name,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{"ea.out.counter.>"}})
	if err != nil {
		t.Fatal(err)
	}
	seenID := map[string]bool{}
	seenCount := map[string]map[int64]string{} // counter -> count -> output id
	read := 0
	for read < total {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("fetch outputs: %v", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			id := msg.Headers().Get("Nats-Msg-Id")
			counter := strings.TrimPrefix(msg.Subject(), "ea.out.counter.")
			if seenID[id] {
				t.Errorf("output id %s appears twice in the outbox of counter/%s", id, counter)
			}
			seenID[id] = true
			cause := msg.Headers().Get("EA-Cause")
			if !outputIDOf(cause, "0").MatchString(id) || !strings.HasPrefix(cause, "in-"+counter+"-") {
				t.Errorf("output %s of counter/%s has cause %q: want id <one of our inc ids>:0.<tag>", id, counter, cause)
			}
			var out struct {
				Count int64 `msgpack:"count"`
			}
			if err := msgpack.Unmarshal(msg.Data(), &out); err != nil {
				t.Errorf("output %s: decode: %v", id, err)
			}
			if seenCount[counter] == nil {
				seenCount[counter] = map[int64]string{}
			}
			switch other, twice := seenCount[counter][out.Count]; {
			case out.Count < 1 || out.Count > want[counter]:
				t.Errorf("output %s of counter/%s says count %d: want each of 1..%d once", id, counter, out.Count, want[counter])
			case twice:
				t.Errorf("outputs %s and %s of counter/%s both say count %d: want each of 1..%d once "+
					"(one comes from an attempt whose state write lost, and its own retry's output was dropped as a duplicate id)",
					other, id, counter, out.Count, want[counter])
			default:
				seenCount[counter][out.Count] = id
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("fetch outputs: %v", err)
		}
		if got == 0 {
			t.Fatalf("read %d of %d outputs, then nothing more", read, total)
		}
		read += got
	}
	for _, id := range ids {
		var missing []int64
		for c := int64(1); c <= want[id] && len(missing) < 10; c++ {
			if _, ok := seenCount[id][c]; !ok {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			t.Errorf("no output of counter/%s says count %v (first 10 missing at most)", id, missing)
		}
	}
}

func checkNoDeadLetters(t testing.TB, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	dead, err := js.Stream(ctx, "EA_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	if n := dead.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// logRuntimeMetrics logs the node's ea_ counters of records processed and
// redelivered: how the restart went.
func logRuntimeMetrics(t testing.TB, p *process) {
	t.Helper()
	_, body := proctest.Get("http://" + p.metrics + "/metrics")
	var lines []string
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "ea_records_processed_total") || strings.HasPrefix(line, "ea_record_redeliveries_total") ||
			strings.HasPrefix(line, "ea_state_conflicts_total") {
			lines = append(lines, "  "+strings.TrimSpace(line))
		}
	}
	t.Logf("%s node metrics:\n%s", p.Name, strings.Join(lines, "\n"))
}

// TestEmbeddedDefault runs ea-node with no --nats: it embeds NATS, prints the
// hint, counts, serves metrics and stops cleanly on SIGTERM.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	listen, metrics := proctest.FreeAddr(t), proctest.FreeAddr(t)
	p := startNode(t, "embedded", metrics, "--listen", listen, "--store", t.TempDir(), "--metrics", metrics)
	p.waitReady(t, 30*time.Second)

	eventually(t, 5*time.Second, "the hint on stdout", func() bool {
		return strings.Contains(p.Stdout.String(), "nats req ea.ctl.create.counter")
	})
	out := p.Stdout.String()
	for _, want := range []string{
		"export EA_NATS=nats://" + listen,
		"bin/ea create counter/c1",
		`bin/ea send counter/c1 '{"by":2}' --type inc --wait`,
		"export NATS_URL=nats://" + listen,
		`nats req ea.ctl.create.counter '{"id":"c1"}'`,
		`nats pub ea.mbox.counter.c1 '{"by":2}' -H EA-Type:inc -H Content-Type:application/json`,
		"nats kv get ea_state counter.c1",
		"nats sub 'ea.out.counter.c1'",
		`nats req ea.ctl.create.controller '{"id":"ctl"}'`,
		`nats pub ea.mbox.controller.ctl '{"counter":"c1","times":100}' -H EA-Type:start -H Content-Type:application/json`,
		"curl -s http://" + metrics + "/metrics | grep ea_",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("hint lacks %q:\n%s", want, out)
		}
	}
	if code, body := proctest.Get("http://" + metrics + "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}

	nc, err := nats.Connect("nats://" + listen)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	createEffector(t, nc, "ea", "counter", "c1")
	inc := nats.NewMsg("ea.mbox.counter.c1")
	inc.Header.Set("EA-Type", "inc")
	inc.Header.Set("Content-Type", "application/json")
	inc.Data = []byte(`{"by":1}`)
	ack, err := nc.RequestMsg(inc, 10*time.Second) // the stream answers with its ack
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ack.Data), `"stream":"EA_MBOX"`) {
		t.Fatalf("publish to the mailbox: reply %s, want a stream ack", ack.Data)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := js.KeyValue(ctx, "ea_state")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "counter/c1 to count 1", func() bool {
		d, err := proctest.ReadState(ctx, bucket, "counter.c1")
		if err != nil {
			t.Fatal(err)
		}
		if d.Count() > 1 {
			t.Fatalf("counter/c1 counted %d, want 1", d.Count())
		}
		return d.Count() == 1
	})

	const line = `ea_records_processed_total{kind="counter",outcome="ok"} 1`
	var body string
	eventually(t, 10*time.Second, "the processed record in /metrics", func() bool {
		var code int
		code, body = proctest.Get("http://" + metrics + "/metrics")
		return code == http.StatusOK && hasLine(body, line)
	})
	for _, want := range []string{`ea_effectors_active{kind="counter"} 1`, "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
	if code, _ := proctest.Get("http://" + metrics + "/healthz"); code != 0 {
		t.Errorf("/healthz answers %d after exit", code)
	}
}

func hasLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimRight(l, "\n") == line {
			return true
		}
	}
	return false
}

// TestListenInUse checks that ea-node fails at start, exit status 1, when the
// embedded server's address is taken, and says which flag to change.
func TestListenInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := startNode(t, "busy", "", "--listen", ln.Addr().String(), "--store", t.TempDir(), "--metrics", "off")
	if code := p.Wait(t, 30*time.Second); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.Contains(p.Stderr.String(), "--listen") {
		t.Errorf("stderr does not name --listen:\n%s", p.Stderr.String())
	}
}

// TestBadUsage checks exit statuses and messages of the binary itself.
func TestBadUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		env    []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"--log-level", "loud"}, code: 2,
			stderr: `ea-node: --log-level "loud": want debug, info, warn or error`},
		{env: []string{"EA_REPLICAS=9"}, code: 2,
			stderr: `ea-node: --replicas "9" (from EA_REPLICAS): want a whole number from 1 to 5`},
		{args: []string{"--nope"}, code: 2, stderr: "flag provided but not defined: -nope"},
		{args: []string{"-h"}, code: 0, stdout: "EA_SHUTDOWN_GRACE"},
	} {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = append(proctest.Environ("EA_"), tc.env...)
		var stdout, stderr proctest.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if code := cmd.ProcessState.ExitCode(); code != tc.code {
			t.Errorf("ea-node %q %q: exit status %d, want %d", tc.env, tc.args, code, tc.code)
		}
		if !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("ea-node %q %q:\nstdout %q\nstderr %q\nwant stdout with %q, stderr with %q",
				tc.env, tc.args, stdout.String(), stderr.String(), tc.stdout, tc.stderr)
		}
	}
}
