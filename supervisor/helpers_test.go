package supervisor_test

import (
	"context"
	"encoding/json"
	"github.com/effectors/effectors/examples/demo"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet discards logs below warnings.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// running is something Run in the background of a test.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func (r *running) Stop(t testing.TB) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("did not stop within 60s")
		}
	})
}

func background(t testing.TB, run func(context.Context) error, ready func() bool, what string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	actortest.Eventually(t, 30*time.Second, what+" ready", func() bool {
		select {
		case err := <-r.done:
			r.done <- nil
			t.Fatalf("%s Run returned early: %v", what, err)
		default:
		}
		return ready()
	})
	return r
}

// startWorkers runs a node hosting the task kinds A and B.
func startWorkers(t testing.TB, conn *bus.Conn) *actortest.Node {
	t.Helper()
	return actortest.StartNode(t, conn, actor.Options{ShutdownGrace: 5 * time.Second, Logger: quiet}, kinds.TaskA(), kinds.TaskB())
}

// sup is a supervisor running in a test.
type sup struct {
	*supervisor.Supervisor
	reg *prometheus.Registry
	*running
}

// startSupervisor runs a supervisor with the demo and defs.
func startSupervisor(t testing.TB, conn *bus.Conn, defs ...supervisor.Definition) *sup {
	t.Helper()
	return startSupervisorWith(t, conn, nil, defs...)
}

// startSupervisorWith is startSupervisor with setup run before Run.
func startSupervisorWith(t testing.TB, conn *bus.Conn, setup func(*supervisor.Supervisor), defs ...supervisor.Definition) *sup {
	t.Helper()
	reg := prometheus.NewRegistry()
	// The default options, as ea-supervisor runs (AckWait 5 s).
	s, err := supervisor.New(conn, supervisor.Options{Registerer: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	demoDef, err := demo.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(append(defs, demoDef)...); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	return &sup{Supervisor: s, reg: reg, running: background(t, s.Run, s.Ready, "supervisor")}
}

func (s *sup) counter(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func newClient(t testing.TB, conn *bus.Conn) *supervisor.Client {
	t.Helper()
	c, err := supervisor.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitStatus polls orchestration id until its status is want, failing early
// if it reaches another final status.
func waitStatus(t testing.TB, c *supervisor.Client, id string, want supervisor.Status) supervisor.Orchestration {
	t.Helper()
	var o supervisor.Orchestration
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last status of %s: %+v", id, o)
		}
	})
	actortest.Eventually(t, 30*time.Second, "orchestration "+id+" "+string(want), func() bool {
		var err error
		o, err = c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != want && o.Status.Final() {
			t.Fatalf("orchestration %s is %s (error %q), want %s; results %s", id, o.Status, o.Error, want, o.Results)
		}
		return o.Status == want
	})
	return o
}

func demoResults(t testing.TB, o supervisor.Orchestration) demo.Results {
	t.Helper()
	var r demo.Results
	if err := json.Unmarshal(o.Results, &r); err != nil {
		t.Fatalf("results %s: %v", o.Results, err)
	}
	return r
}

// mailboxRecords returns the records stored on subject (a filter).
func mailboxRecords(t testing.TB, conn *bus.Conn, subject string) []records.Record {
	t.Helper()
	ctx := ctxT(t)
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
	if n == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []records.Record
	for uint64(len(out)) < n {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("read %s: %v (%d of %d)", subject, err, len(out), n)
		}
		rec, err := records.FromMsg(m.Subject(), m.Headers(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}
