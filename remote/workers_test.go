package remote_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
	"github.com/effectors/effectors/retry"
)

// A reference worker of clients/workers: the command that runs it.
type worker struct {
	lang string
	encs []remote.Encoding // the encodings it speaks
}

var workers = []worker{
	{"js", []remote.Encoding{remote.JSON, remote.Msgpack}},
	{"python", []remote.Encoding{remote.JSON}},
}

// command returns the program and arguments that start w's main, or skips
// the test when its runtime is missing.
func (w worker) command(t testing.TB) (string, []string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "clients", "workers", w.lang))
	if err != nil {
		t.Fatal(err)
	}
	switch w.lang {
	case "js":
		node, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node (Node.js) is not installed: the JavaScript reference worker is not tested (.ci/run installs it)")
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "nats", "package.json")); err != nil {
			t.Skipf("the JavaScript worker's npm modules are missing: run npm ci in %s (.ci/run does)", dir)
		}
		return node, []string{filepath.Join(dir, "main.js")}
	default:
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 is not installed: the Python reference worker is not tested (.ci/run installs it)")
		}
		return py, []string{filepath.Join(dir, "main.py")}
	}
}

// start runs one worker process of kind against url with extra
// environment, and waits until it serves.
func (w worker) start(t testing.TB, name, url, kind string, env ...string) *proctest.Proc {
	t.Helper()
	prog, args := w.command(t)
	env = append(proctest.Environ("EA_", "NATS_"), append([]string{"NATS_URL=" + url, "EA_KIND=" + kind}, env...)...)
	p := proctest.Start(t, name, prog, args, env)
	p.WaitOutput(t, time.Minute, "ready")
	return p
}

// TestReferenceWorkers runs the counter of each reference worker (two
// processes sharing the load) against a real node, in each encoding it
// speaks: exact counts and outputs, a reply, and an unknown type in dead
// letters with the worker's reason.
func TestReferenceWorkers(t *testing.T) {
	for _, w := range workers {
		for _, enc := range w.encs {
			t.Run(w.lang+"/"+string(enc[len("application/"):]), func(t *testing.T) {
				w.command(t) // skips before starting anything
				srv := bustest.NewServer(t)
				conn := srv.Connect(t)
				names := conn.Names()
				w.start(t, w.lang+"-1", srv.URL, "counter")
				w.start(t, w.lang+"-2", srv.URL, "counter")
				host(t, conn, "counter", remote.Options{Encoding: enc})
				c := newClient(t, conn)
				// Both announce themselves (docs/polyglot.md, "Discovery")
				// with the type their logic handles.
				if info := kindInfo(t, c, "counter", ""); info.Remote == nil || info.Remote.Workers != 2 || !info.Remote.Answering || !slices.Equal(info.Types, []string{"inc"}) {
					t.Fatalf("kind info %+v %+v: want 2 workers announcing type inc", info, info.Remote)
				}

				const ids, per = 3, 30
				refs := make([]records.Ref, ids)
				for i := range refs {
					refs[i] = records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
					actortest.Create(t, c, refs[i], nil)
				}
				want := make([][]int64, ids)
				for n := 1; n <= per; n++ {
					for i, ref := range refs {
						var payload any
						by := int64(1)
						if n%2 == 0 {
							by = int64(n + i)
							payload = map[string]any{"by": by}
						}
						last := int64(0)
						if len(want[i]) > 0 {
							last = want[i][len(want[i])-1]
						}
						want[i] = append(want[i], last+by)
						if n%3 == 0 {
							rec, err := records.New("inc", payload) // msgpack
							if err != nil {
								t.Fatal(err)
							}
							if _, err := c.Send(ctxT(t), ref, rec); err != nil {
								t.Fatal(err)
							}
							continue
						}
						send(t, c, ref, "inc", payload, "")
					}
				}
				inbox := nats.NewInbox()
				replies, err := conn.NATS().SubscribeSync(inbox)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = replies.Unsubscribe() }()
				send(t, c, refs[0], "inc", map[string]any{"by": 1000}, inbox)
				want[0] = append(want[0], want[0][len(want[0])-1]+1000)
				send(t, c, refs[1], "dec", nil, "")

				for i, ref := range refs {
					waitCount(t, c, ref, want[i][len(want[i])-1], 2*time.Minute)
					if got := counts(t, stored(t, conn, names.OutboxStream(), names.Outbox(ref))); !slices.Equal(got, want[i]) {
						t.Fatalf("%s outputs %v, want %v", ref, got, want[i])
					}
				}
				msg, err := replies.NextMsg(time.Minute)
				if err != nil {
					t.Fatalf("no reply: %v", err)
				}
				rep, err := records.FromMsg(msg.Subject, msg.Header, msg.Data)
				if err != nil {
					t.Fatal(err)
				}
				if got := counts(t, []records.Record{rep}); got[0] != want[0][len(want[0])-1] || rep.Type != "count" {
					t.Fatalf("reply %s %v, want count %d", rep.Type, got, want[0][len(want[0])-1])
				}
				var dl []records.Record
				actortest.Eventually(t, time.Minute, "dead letter of dec", func() bool {
					dl = stored(t, conn, names.DeadStream(), names.Dead(refs[1]))
					return len(dl) > 0
				})
				if reason := string(dl[0].Payload); len(dl) != 1 || !strings.Contains(reason, `failed (permanent): unknown record type`) || !strings.Contains(reason, "dec") {
					t.Fatalf("dead letters of %s: %q, want one for the unknown type dec", refs[1], reason)
				}
			})
		}
	}
}

// TestReferenceWorkerKilled kills a worker process (SIGKILL) while it holds
// records, under load: the node's requests to it time out, the records are
// retried by the other worker, and every count is exact, every output once.
func TestReferenceWorkerKilled(t *testing.T) {
	for _, w := range workers {
		t.Run(w.lang, func(t *testing.T) {
			w.command(t)
			srv := bustest.NewServer(t)
			conn := srv.Connect(t)
			names := conn.Names()
			w.start(t, w.lang+"-steady", srv.URL, "counter")
			// This one holds every request a minute: it is killed holding one.
			doomed := w.start(t, w.lang+"-doomed", srv.URL, "counter", "EA_WORKER_DELAY_MS=60000")
			k, err := remote.New(conn, "counter", remote.Options{
				Timeout: 2 * time.Second,
				Retry:   retry.Policy{Attempts: 20, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Multiplier: 2},
			})
			if err != nil {
				t.Fatal(err)
			}
			n := actortest.StartNode(t, conn, actor.Options{}, k)
			c := newClient(t, conn)
			const ids, per = 4, 50
			refs := make([]records.Ref, ids)
			for i := range refs {
				refs[i] = records.Ref{Kind: "counter", ID: fmt.Sprint("k", i)}
				actortest.Create(t, c, refs[i], nil)
			}
			go func() {
				for range per {
					for _, ref := range refs {
						rec, err := records.NewJSON("inc", nil)
						if err != nil {
							t.Error(err)
							return
						}
						if _, err := c.Send(ctxT(t), ref, rec); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
			doomed.WaitOutput(t, time.Minute, "holding record")
			if err := doomed.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			doomed.Wait(t, 30*time.Second)
			for _, ref := range refs {
				waitCount(t, c, ref, per, 3*time.Minute)
				if got := counts(t, stored(t, conn, names.OutboxStream(), names.Outbox(ref))); !slices.Equal(got, running(per)) {
					t.Fatalf("%s outputs %v, want %v", ref, got, running(per))
				}
				if dl := stored(t, conn, names.DeadStream(), names.Dead(ref)); len(dl) != 0 {
					t.Fatalf("%s: dead letter %q", ref, dl[0].Payload)
				}
			}
			if r := metricSum(t, n.Registry, "ea_logic_retries_total"); r < 1 {
				t.Fatalf("ea_logic_retries_total %v: no record was retried, so the kill did not land on a held record", r)
			}
		})
	}
}

// metricSum sums the samples of counter name in reg.
func metricSum(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
