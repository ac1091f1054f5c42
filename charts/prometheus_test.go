package charts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// prometheusBinary returns the Prometheus server binary, or skips the test.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("EA_PROMETHEUS"), "/usr/bin/prometheus"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	t.Skip("prometheus is not installed: apt-get install prometheus (Debian; .ci/run installs it), or set EA_PROMETHEUS to the binary")
	return ""
}

// grafanaVars are what Grafana substitutes in the dashboard's queries, as
// this test asks Prometheus directly: every kind, a rate window of several
// scrapes, the dashboard's range.
var grafanaVars = strings.NewReplacer(`$kind`, `.*`, `$__rate_interval`, `15s`, `$__range`, `5m`)

// TestPrometheusAnswersEveryDashboardQuery starts a real Prometheus scraping
// two nodes and a supervisor (their /metrics over HTTP, every second) while
// records flow, a node dies (hand-overs), records fail and are retried, a
// state write loses its compare-and-set, effectors passivate and come back,
// and orchestrations complete and are cancelled; then it asks Prometheus
// every query of the Grafana dashboard, as Grafana would, and requires a
// non-empty answer for each.
// Not parallel: two nodes under load, one killed, with 10s deadlines.
func TestPrometheusAnswersEveryDashboardQuery(t *testing.T) {
	bin := prometheusBinary(t)
	srv := bustest.NewServer(t)
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("EA_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(t.Output(), nil))
	}

	// The kinds: counter (dead letters for an unknown type), a flaky kind
	// whose logic fails the first attempt at each record (retries), a slow
	// kind that keeps records in hand when a node dies (redeliveries), and
	// the demo's workers.
	var flakyMu sync.Mutex
	failed := map[string]bool{}
	flaky := actor.Kind[kinds.CounterState]{Name: "flaky", Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
		flakyMu.Lock()
		defer flakyMu.Unlock()
		if id := ctx.Record().ID; !failed[id] {
			failed[id] = true
			return s, errors.New("first attempt fails")
		}
		s.Count++
		return s, nil
	}}
	slow := actor.Kind[kinds.CounterState]{Name: "slow", Logic: func(ctx *actor.Context, s kinds.CounterState) (kinds.CounterState, error) {
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		s.Count++
		return s, nil
	}}
	defs := []actor.Definition{kinds.Counter(), kinds.TaskA(), kinds.TaskB(), flaky, slow}
	opts := actor.Options{Logger: log, Heartbeat: 100 * time.Millisecond, HeartbeatTTL: 700 * time.Millisecond,
		IdleTimeout: time.Second, ShutdownGrace: time.Second}

	type target struct {
		reg  *prometheus.Registry
		http *httptest.Server
	}
	serve := func(reg *prometheus.Registry) target {
		h := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(h.Close)
		return target{reg: reg, http: h}
	}
	startNode := func(conn *bus.Conn) target {
		reg := prometheus.NewRegistry()
		o := opts
		o.Registerer = reg
		n, err := actor.NewNode(conn, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Host(defs...); err != nil {
			t.Fatal(err)
		}
		actortest.Run(t, n)
		// As every binary does (node.Command, supervisor.Command).
		reg.MustRegister(cli.NewConnStateCollector(conn, bus.ConnStates()))
		return serve(reg)
	}
	connA, connB := srv.Connect(t), srv.Connect(t)
	nodeA, nodeB := startNode(connA), startNode(connB)

	supReg := prometheus.NewRegistry()
	supConn := srv.Connect(t)
	supReg.MustRegister(cli.NewConnStateCollector(supConn, bus.ConnStates()))
	sup, err := supervisor.New(supConn, supervisor.Options{Logger: log, Registerer: supReg})
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
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := sup.Run(ctx); err != nil {
			t.Errorf("supervisor: %v", err)
		}
	})
	supT := serve(supReg)
	actortest.Eventually(t, 30*time.Second, "supervisor ready", sup.Ready)

	prom := startPrometheus(t, bin, map[string][]string{
		"ea-node":       {hostPort(t, nodeA.http.URL), hostPort(t, nodeB.http.URL)},
		"ea-supervisor": {hostPort(t, supT.http.URL)},
	})

	conn := srv.Connect(t)
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	send := func(ref records.Ref, typ string, v any) records.Record {
		t.Helper()
		rec, err := records.NewJSON(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		sent, err := client.Send(ctx, ref, rec)
		if err != nil {
			t.Fatalf("send to %s: %v", ref, err)
		}
		return sent
	}
	create := func(ref records.Ref) {
		t.Helper()
		if _, err := client.Create(ctx, ref, nil); err != nil {
			t.Fatalf("create %s: %v", ref, err)
		}
	}

	// Load for the whole test: counters incremented every 20ms.
	counters := []records.Ref{{Kind: "counter", ID: "c1"}, {Kind: "counter", ID: "c2"}}
	for _, r := range counters {
		create(r)
	}
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			rec, err := records.NewJSON("inc", map[string]int{"by": 1})
			if err == nil {
				_, err = client.Send(ctx, counters[i%len(counters)], rec)
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("load: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	// Node B dies while it drives slow effectors (records in hand or
	// waiting): node A takes its partitions over (hand-overs) and processes
	// every record. (They are not counted
	// as redeliveries: the new reader resets the partition consumer, which
	// starts delivery counts again. Redeliveries show as a 0 series, as
	// every per-kind counter of a hosted kind starts at 0.)
	actortest.Eventually(t, 10*time.Second, "both nodes see each other", func() bool {
		return gauge(t, nodeA.reg, "ea_nodes_live") == 2 && gauge(t, nodeB.reg, "ea_nodes_live") == 2
	})
	var slows []records.Ref
	for i := range 24 {
		r := records.Ref{Kind: "slow", ID: fmt.Sprintf("s%d", i)}
		create(r)
		slows = append(slows, r)
	}
	lastSent := map[records.Ref]uint64{}
	for range 5 {
		for _, r := range slows {
			lastSent[r] = send(r, "inc", nil).Seq
		}
	}
	actortest.Eventually(t, 10*time.Second, "node B drives slow effectors", func() bool {
		return gauge(t, nodeB.reg, "ea_effectors_active", "kind", "slow") > 0
	})
	connB.NATS().Close()
	actortest.Eventually(t, 30*time.Second, "node A takes node B's partitions over", func() bool {
		return gauge(t, nodeA.reg, "ea_handovers_total") > 0
	})
	for _, r := range slows {
		if _, err := client.StateAt(ctx, r, lastSent[r]); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
	}

	// Failures: a dead letter, logic retries, a lost compare-and-set.
	send(counters[0], "bogus", nil)
	fl := records.Ref{Kind: "flaky", ID: "f1"}
	create(fl)
	send(fl, "inc", nil)
	sent := send(fl, "inc", nil)
	if _, err := client.StateAt(ctx, fl, sent.Seq); err != nil {
		t.Fatal(err)
	}
	// flaky/f1 is loaded with its state's revision cached: rewrite the
	// document behind its back, and its next write loses the
	// compare-and-set.
	states, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := conn.Names().StateKey(fl)
	e, err := states.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := states.Put(ctx, key, e.Value()); err != nil {
		t.Fatal(err)
	}
	sent = send(fl, "inc", nil)
	if _, err := client.StateAt(ctx, fl, sent.Seq); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 10*time.Second, "failures counted", func() bool {
		return gauge(t, nodeA.reg, "ea_dead_letters_total") > 0 && gauge(t, nodeA.reg, "ea_logic_retries_total") > 0 &&
			gauge(t, nodeA.reg, "ea_state_conflicts_total") > 0
	})
	// Passivation (idle for a second), then activation by a new record.
	actortest.Eventually(t, 10*time.Second, "flaky/f1 passivated", func() bool {
		return gauge(t, nodeA.reg, "ea_passivations_total", "kind", "flaky") > 0
	})
	sent = send(fl, "inc", nil)
	if _, err := client.StateAt(ctx, fl, sent.Seq); err != nil {
		t.Fatal(err)
	}

	// Orchestrations: one completed, one cancelled, one waiting.
	var ids []string
	for i := range 3 {
		id, err := sup.Start(ctx, demo.Name, []byte(fmt.Sprintf(`{"text":"run %d"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		actortest.Eventually(t, 20*time.Second, "orchestration "+id+" waits for input", func() bool {
			o, err := sup.Status(ctx, id)
			return err == nil && o.Status == supervisor.StatusWaiting
		})
	}
	if _, err := sup.Input(ctx, ids[0], []byte(`{"note":"n"}`)); err != nil {
		t.Fatal(err)
	}
	if err := sup.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 20*time.Second, "orchestration completes", func() bool {
		o, err := sup.Status(ctx, ids[0])
		return err == nil && o.Status == supervisor.StatusCompleted
	})

	// Every query of the dashboard answers, as Grafana would ask it.
	d := loadDashboard(t)
	type query struct{ panel, ref, expr string }
	var queries []query
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			queries = append(queries, query{p.Title, tg.RefID, grafanaVars.Replace(tg.Expr)})
		}
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	answers := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var empty []string
		for _, q := range queries {
			n, err := prom.query(ctx, q.expr)
			if err != nil {
				t.Fatalf("panel %q, query %s: %v", q.panel, q.ref, err)
			}
			answers[q.expr] = n
			if n == 0 {
				empty = append(empty, fmt.Sprintf("panel %q query %s: %s", q.panel, q.ref, q.expr))
			}
		}
		if len(empty) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus answers nothing for %d of %d dashboard queries:\n%s", len(empty), len(queries), strings.Join(empty, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, q := range queries {
		t.Logf("%d series: %s", answers[q.expr], q.expr)
	}
	// What the load made happen reached Prometheus, not only 0 series.
	for _, expr := range []string{
		`sum(ea_handovers_total)`, `sum(ea_state_conflicts_total)`, `sum(ea_logic_retries_total)`,
		`sum(ea_dead_letters_total{reason="rejected"})`, `sum(ea_passivations_total)`, `sum(ea_activations_total)`,
		`sum(ea_orchestrations_finished_total{status="COMPLETED"})`, `sum(ea_orchestrations_finished_total{status="CANCELLED"})`,
		`sum(ea_orchestration_step_seconds_count{event="input"})`,
	} {
		v, err := prom.value(ctx, expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if v <= 0 {
			t.Errorf("%s = %v in Prometheus, want > 0", expr, v)
		}
	}
	// The kind variable (Grafana's label_values(ea_records_processed_total, kind)).
	kindsSeen, err := prom.labelValues(ctx, "kind", "ea_records_processed_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"counter", "flaky", "slow", "task-a", "task-b"} {
		if !slices.Contains(kindsSeen, k) {
			t.Errorf("label_values(ea_records_processed_total, kind) = %v, lacks %s", kindsSeen, k)
		}
	}
}

// gauge sums the current values of a metric's series in reg (a counter or a
// gauge), optionally only those with a label's value.
func gauge(t *testing.T, reg *prometheus.Registry, name string, label ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(label) == 2 {
				for _, l := range m.GetLabel() {
					if l.GetName() == label[0] && l.GetValue() != label[1] {
						continue metrics
					}
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func hostPort(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// promServer is a Prometheus server this test started.
type promServer struct {
	base   string
	client *http.Client
}

// startPrometheus runs Prometheus scraping the given jobs every second,
// with its storage in a temporary directory, until the test ends.
func startPrometheus(t *testing.T, bin string, jobs map[string][]string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n")
	for job, targets := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: ['%s']\n", job, strings.Join(targets, "', '"))
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
	})
	p := &promServer{base: "http://" + addr, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(p.client.CloseIdleConnections)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("prometheus exited at start: %v\n%s", err, b)
		default:
		}
		resp, err := p.client.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready at %s after 30s: %v", p.base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// query runs an instant query and returns how many series answer.
func (p *promServer) query(ctx context.Context, expr string) (int, error) {
	var res struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &res); err != nil {
		return 0, err
	}
	if res.Status != "success" {
		return 0, fmt.Errorf("prometheus: %s: %s", res.ErrorType, res.Error)
	}
	return len(res.Data.Result), nil
}

// value runs an instant query answered by one series and returns its value.
func (p *promServer) value(ctx context.Context, expr string) (float64, error) {
	var res struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &res); err != nil {
		return 0, err
	}
	if res.Status != "success" || len(res.Data.Result) != 1 {
		return 0, fmt.Errorf("want one series, got %d (%s %s)", len(res.Data.Result), res.Status, res.Error)
	}
	s, _ := res.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// labelValues returns the values of label on the series of metric.
func (p *promServer) labelValues(ctx context.Context, label, metric string) ([]string, error) {
	var res struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/label/"+label+"/values?match[]="+url.QueryEscape(metric), &res); err != nil {
		return nil, err
	}
	return res.Data, nil
}

func (p *promServer) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("prometheus %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	return nil
}
