package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
	"github.com/effectors/effectors/retry"
)

// logBuffer is a slog destination tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged records (JSON) whose message contains msg.
func (b *logBuffer) lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

// announce makes nc answer the pings of kind's workers' discovery as a
// worker with instance id and record types (comma-separated; "" for none):
// the micro protocol's ping response, written by hand as a worker in
// another language would.
func announce(t testing.TB, nc *nats.Conn, names bus.Names, kind, id, types string) {
	t.Helper()
	_, err := nc.Subscribe(names.LogicPing(kind), func(m *nats.Msg) {
		body, _ := json.Marshal(map[string]any{
			"type": "io.nats.micro.v1.ping_response", "name": names.LogicService(kind), "id": id, "version": "1.0.0",
			"metadata": map[string]string{"types": types},
		})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func kindInfo(t testing.TB, c *actor.Client, kind, id string) actor.KindInfo {
	t.Helper()
	info, err := c.Kind(ctxT(t), kind, id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestStallVisible: a remote kind with no worker says so everywhere: one
// WARN naming the kind and the subject for the whole episode (however many
// records and effectors wait), the kind endpoint (no worker answers, who
// waits), the gauges; a worker that starts ends the episode with one INFO,
// is counted, and its announced types become the kind's.
func TestStallVisible(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	var logs logBuffer
	reg := prometheus.NewRegistry()
	host(t, conn, "counter", remote.Options{
		Logger:     slog.New(slog.NewJSONHandler(&logs, nil)),
		Registerer: reg,
		Retry:      retry.Policy{Attempts: 1000, Backoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Multiplier: 2},
	})
	c := newClient(t, conn)
	refs := []records.Ref{{Kind: "counter", ID: "c1"}, {Kind: "counter", ID: "c2"}, {Kind: "counter", ID: "c3"}}
	for _, ref := range refs {
		actortest.Create(t, c, ref, nil)
		send(t, c, ref, "inc", nil, "")
		send(t, c, ref, "inc", nil, "")
	}
	var info actor.KindInfo
	actortest.Eventually(t, time.Minute, "the three effectors waiting", func() bool {
		info = kindInfo(t, c, "counter", "")
		return info.Remote != nil && len(info.Remote.Waiting) == len(refs)
	})
	r := info.Remote
	if r.Subject != names.Logic("counter") || r.Answering || r.Workers != 0 || r.Down.IsZero() || !strings.Contains(r.Problem, "nothing listens on "+names.Logic("counter")) {
		t.Fatalf("remote info %+v: want subject %s, not answering, 0 workers, down, the problem", r, names.Logic("counter"))
	}
	if w := r.Waiting[0]; w.Record == "" || w.Attempts < 1 || !strings.Contains(w.Reason, remote.ErrNoWorker.Error()) {
		t.Fatalf("waiting %+v: want the record, its attempts and the reason", w)
	}
	one := kindInfo(t, c, "counter", "c2")
	if len(one.Remote.Waiting) != 1 || one.Remote.Waiting[0].Effector != "counter/c2" {
		t.Fatalf("waiting of c2 alone: %+v", one.Remote.Waiting)
	}
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	if s, w := gauge("ea_remote_stalled"), gauge("ea_remote_waiting_effectors"); s != 1 || w != 3 {
		t.Fatalf("ea_remote_stalled %v, ea_remote_waiting_effectors %v: want 1 and 3", s, w)
	}
	// Many requests failed; one WARN, naming the kind and the subject.
	actortest.Eventually(t, time.Minute, "more failed requests", func() bool {
		return outcomeCount(t, reg, "no_worker") >= 20
	})
	warns := logs.lines(t, "remote kind stalled")
	if len(warns) != 1 || warns[0]["level"] != "WARN" || warns[0]["kind"] != "counter" || warns[0]["subject"] != names.Logic("counter") {
		t.Fatalf("stall warnings %v: want one WARN with kind counter and subject %s", warns, names.Logic("counter"))
	}

	w := startGoWorker(t, srv.URL, names, "counter", counter)
	announce(t, w.nc, names, "counter", "w1", "inc")
	for _, ref := range refs {
		waitCount(t, c, ref, 2, time.Minute)
	}
	info = kindInfo(t, c, "counter", "")
	if r := info.Remote; !r.Answering || r.Workers != 1 || !r.Down.IsZero() || len(r.Waiting) != 0 || !slices.Equal(info.Types, []string{"inc"}) {
		t.Fatalf("after a worker started: %+v %+v: want answering, 1 worker, no episode, none waiting, types [inc]", info, r)
	}
	if s, w := gauge("ea_remote_stalled"), gauge("ea_remote_waiting_effectors"); s != 0 || w != 0 {
		t.Fatalf("ea_remote_stalled %v, ea_remote_waiting_effectors %v: want 0 and 0", s, w)
	}
	if infos := logs.lines(t, "answer again"); len(infos) != 1 || infos[0]["level"] != "INFO" || infos[0]["kind"] != "counter" {
		t.Fatalf("recovery lines %v: want one INFO", infos)
	}
	if n := len(logs.lines(t, "remote kind stalled")); n != 1 {
		t.Fatalf("%d stall warnings: want still 1", n)
	}
}

// outcomeCount reads ea_remote_requests_total{outcome}.
func outcomeCount(t testing.TB, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ea_remote_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no ea_remote_requests_total{outcome=%q}", outcome)
	return 0
}

// TestWorkerGoneFast: the only worker dies holding a request. With no
// worker left, the node learns it from NATS ("no responders" to a probe)
// well before the 10s timeout, and says so; a worker that starts then
// applies the record once.
func TestWorkerGoneFast(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	died := make(chan time.Time, 1)
	var doomed *goWorker
	doomed = startGoWorker(t, srv.URL, names, "counter", func(req map[string]any, n int64) any {
		if n == 1 {
			go func() {
				doomed.nc.Close() // dies holding the record
				died <- time.Now()
			}()
		}
		return nil
	})
	host(t, conn, "counter", remote.Options{Retry: retry.Policy{Attempts: 1000, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Multiplier: 2}})
	c := newClient(t, conn)
	ref := records.Ref{Kind: "counter", ID: "c1"}
	actortest.Create(t, c, ref, nil)
	send(t, c, ref, "inc", nil, "")
	var at time.Time
	select {
	case at = <-died:
	case <-ctxT(t).Done():
		t.Fatal("the worker never got the request")
	}
	var w actor.Waiting
	actortest.Eventually(t, 10*time.Second, "the record to wait for a worker", func() bool {
		r := kindInfo(t, c, "counter", "c1").Remote
		if len(r.Waiting) == 0 || r.Answering {
			return false
		}
		w = r.Waiting[0]
		return true
	})
	if took := time.Since(at); took > 3*time.Second || !strings.Contains(w.Reason, "the worker holding the request left") {
		t.Fatalf("%s after the worker died: waiting %+v; want the worker's departure noticed within 3s (the timeout is 10s)", took.Round(time.Millisecond), w)
	}
	startGoWorker(t, srv.URL, names, "counter", counter)
	waitCount(t, c, ref, 1, time.Minute)
}

// TestDeclaredTypes: Options.Types are the kind's, whatever the workers
// announce; a kind whose workers announce none takes any type.
func TestDeclaredTypes(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	names := conn.Names()
	k, err := remote.New(conn, "typed", remote.Options{Types: []string{"inc", "dec"}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := remote.New(conn, "untyped", remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, conn, actor.Options{}, k, u)
	w := startGoWorker(t, srv.URL, names, "untyped", counter)
	announce(t, w.nc, names, "untyped", "w1", "")
	c := newClient(t, conn)
	if info := kindInfo(t, c, "typed", ""); !slices.Equal(info.Types, []string{"dec", "inc"}) || info.Accepts("message") || !info.Accepts("inc") {
		t.Fatalf("typed: %+v", info)
	}
	if info := kindInfo(t, c, "untyped", ""); len(info.Types) != 0 || !info.Accepts("anything") || info.Remote.Workers != 1 {
		t.Fatalf("untyped: %+v %+v", info, info.Remote)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	if _, err := c.Kind(ctx, "nobody", ""); !errors.Is(err, actor.ErrNoHost) {
		t.Fatalf("a kind no node hosts: %v, want ErrNoHost", err)
	}
}
