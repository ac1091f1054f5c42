//go:build unix

package torture

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fault names, as TORTURE_FAULTS takes them.
const (
	faultKillNode = "kill-node"       // kill -9 of a node; its slot stays empty until add-node
	faultTermNode = "term-node"       // SIGTERM of a node (a graceful stop); its slot stays empty until add-node
	faultAddNode  = "add-node"        // a new node in an empty slot: partitions move to it
	faultKillSup  = "kill-supervisor" // kill -9 of the supervisor, then a new one
	faultStop     = "stop-node"       // SIGSTOP of a node for hold, then SIGCONT
	faultCut      = "cut-node"        // the link between a node and NATS black-holed for hold
	faultNATS     = "restart-nats"    // kill -9 of the NATS server, then a new one on the same store
)

// plan is the load and the faults of one run.
type plan struct {
	name       string
	nodes      int // node slots
	spare      int // slots left empty at the start, for add-node
	partitions int // the nodes' --partitions
	counters   int
	rate       int // increments per second
	badEvery   int // every badEvery-th record is bad input
	heartbeat  time.Duration
	ttl        time.Duration // the nodes' --heartbeat-ttl: a silent node's leases move after it
	allow      time.Duration // how long a counter may wait after a fault clears; zero: ttl + 2s
	hold       time.Duration // how long a stop or a cut lasts
	faults     []string      // in order
	timeout    time.Duration
}

// shortFaults are the faults of the short form: those the runtime survives
// today within the allowance, reliably (see the package doc for the others).
var shortFaults = []string{faultKillSup, faultAddNode, faultKillSup}

// allFaults is one round of the long form.
var allFaults = []string{faultTermNode, faultAddNode, faultKillNode, faultAddNode, faultKillSup, faultStop, faultCut, faultNATS}

// planFromEnv is the short form, or the long one with TORTURE=long.
// TORTURE_FAULTS (comma-separated names, see the fault constants) replaces
// the list of faults of either, TORTURE_ROUNDS the long form's rounds (3)
// and TORTURE_COUNTERS its counters.
func planFromEnv(t testing.TB) plan {
	t.Helper()
	p := plan{name: "short", nodes: 4, spare: 1, partitions: 64, counters: 100, rate: 250, badEvery: 97,
		heartbeat: time.Second, ttl: 3 * time.Second, faults: shortFaults, timeout: 4 * time.Minute}
	if raceEnabled { // the nodes built with the race detector are several times slower
		p.rate = 150
	}
	if os.Getenv("TORTURE") == "long" {
		rounds := envInt(t, "TORTURE_ROUNDS", 3)
		p.name, p.counters, p.rate, p.timeout = "long", envInt(t, "TORTURE_COUNTERS", 500), 500, 30*time.Minute
		p.nodes, p.spare = 3, 0
		p.heartbeat, p.ttl = time.Second, 3*time.Second // the nodes' defaults
		p.faults = nil
		for range rounds {
			p.faults = append(p.faults, allFaults...)
		}
	}
	p.hold = 3 * p.ttl
	if s := os.Getenv("TORTURE_FAULTS"); s != "" {
		p.faults = strings.Split(s, ",")
		for _, f := range p.faults {
			if !slices.Contains(allFaults, f) {
				t.Fatalf("TORTURE_FAULTS: unknown fault %q: want some of %s", f, strings.Join(allFaults, ","))
			}
		}
	}
	return p
}

func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// event is one fault injected.
type event struct {
	fault, target string
	start         time.Time // injected
	clear         time.Time // from when the runtime must progress: see the package doc
	healed        time.Time // the fault undone: process back, SIGCONT, link up, server ready
	recovery      time.Duration
	over          int           // counters that stalled past the allowance after it
	election      time.Duration // cluster run: until every stream needed had a leader again, by the JetStream API
	electionJSZ   time.Duration // cluster run: the same by the servers' /jsz
	leases        int           // cluster run: "lost the lease" in the nodes' logs over it
}

// outage is a time the NATS server was down: nothing can progress.
type outage struct{ from, to time.Time }

// TestTorture runs the deployment under load, injects the plan's faults one
// after the other, and checks the whole record log at the end. See the
// package doc.
func TestTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	p := planFromEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	t0 := time.Now()
	d := deploy(t, p)
	nc, js := d.client()
	t.Logf("%s form: %d nodes (%d more slots; lease TTL %s, heartbeat %s), %d counters, %d increments/s, faults %s; deployed in %s",
		p.name, p.nodes-p.spare, p.spare, p.ttl, p.heartbeat, p.counters, p.rate, strings.Join(p.faults, ","), time.Since(t0).Round(time.Millisecond))

	counters := createCounters(t, nc, p.counters)
	kv, err := js.KeyValue(ctx, "ea_state")
	if err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(js, counters, p.rate, p.badEvery)
	monCtx, stopMon := context.WithCancel(ctx)
	mon := startMonitor(monCtx, []jetstream.KeyValue{kv}, pub)
	defer func() { stopMon(); <-mon.done }()
	stopPub := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.run(ctx, stopPub) }()
	pubStopped := false
	defer func() {
		if !pubStopped { // the test failed under load
			close(stopPub)
			cancel() // the publisher may be retrying against a dead server
			<-pubDone
		}
	}()

	// Warm up: records flow before the first fault.
	first := mon.recoverFrom()
	sleep(ctx, 2*time.Second)
	waitRecovered(t, ctx, mon, first, "warm-up", 60*time.Second)

	var events []event
	var outages []outage
	next := 0 // the slot the next node fault strikes, round-robin
	for i, f := range p.faults {
		d.running()
		ev := event{fault: f}
		var r *recovery
		switch f {
		case faultKillNode:
			slot := d.pick(&next, true)
			victim := d.nodes[slot]
			ev.target = victim.id
			ev.start = time.Now()
			r = mon.recoverFrom()
			d.kill(victim.Proc)
			d.nodes[slot] = nil
			ev.healed = ev.start // the survivors hold its partitions
		case faultTermNode:
			slot := d.pick(&next, true)
			victim := d.nodes[slot]
			ev.target = victim.id
			ev.start = time.Now()
			r = mon.recoverFrom()
			if err := victim.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := victim.Wait(t, 30*time.Second); code != 0 {
				t.Fatalf("%s: exit status %d after SIGTERM, want 0", victim.id, code)
			}
			d.nodes[slot] = nil
			ev.healed = time.Now()
		case faultAddNode:
			slot := d.pick(&next, false)
			ev.start = time.Now()
			r = mon.recoverFrom()
			n := d.startNode(slot)
			ev.target = n.id
			d.waitReady(n, 60*time.Second)
			ev.healed = time.Now()
		case faultKillSup:
			ev.target = d.sup.id
			ev.start = time.Now()
			r = mon.recoverFrom()
			d.kill(d.sup.Proc)
			d.waitReady(d.startSupervisor(), 60*time.Second)
			ev.healed = time.Now()
		case faultStop:
			victim := d.nodes[d.pick(&next, true)]
			ev.target = victim.id
			if err := victim.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			ev.start = time.Now()
			r = mon.recoverFrom()
			sleep(ctx, p.hold)
			if err := victim.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			ev.healed = time.Now()
		case faultCut:
			slot := d.pick(&next, true)
			ev.target = d.nodes[slot].id
			d.proxies[slot].Freeze()
			ev.start = time.Now()
			r = mon.recoverFrom()
			sleep(ctx, p.hold)
			d.proxies[slot].Thaw()
			ev.healed = time.Now()
		case faultNATS:
			ev.target = d.nats.Name
			ev.start = time.Now()
			d.kill(d.nats)
			d.startNATS()
			ev.healed = time.Now()
			outages = append(outages, outage{from: ev.start, to: ev.healed})
			mon.watchAgain()
			r = mon.recoverFrom()
		}
		ev.clear = r.at
		waitRecovered(t, ctx, mon, r, fmt.Sprintf("fault %d (%s of %s)", i+1, f, ev.target), 60*time.Second)
		ev.recovery = r.took
		d.allReady(60 * time.Second)
		events = append(events, ev)
		t.Logf("fault %d at %s: %s of %s; undone after %s; every record stored by then applied %s after (%d published, %d retried)",
			i+1, ev.start.Sub(t0).Round(time.Millisecond), f, ev.target, ev.healed.Sub(ev.start).Round(time.Millisecond),
			ev.recovery.Round(time.Millisecond), pub.sent.Load(), pub.retries.Load())
		// Steady load between faults: the next one strikes once the lease
		// TTL has passed (a fault's takeover is over) and every record
		// stored by then is applied.
		sleep(ctx, max(p.ttl, time.Second))
		waitRecovered(t, ctx, mon, mon.recoverFrom(), fmt.Sprintf("after fault %d (%s of %s)", i+1, f, ev.target), 60*time.Second)
	}
	d.running()
	close(stopPub)
	pubStopped = true
	if err := <-pubDone; err != nil {
		t.Fatalf("publisher: %v", err)
	}
	last := mon.recoverFrom()
	waitRecovered(t, ctx, mon, last, "the end of the load", 2*time.Minute)
	stopMon()
	<-mon.done
	t.Logf("load done at %s: %d records published (%d publishes retried), all applied %s after the last",
		time.Since(t0).Round(time.Millisecond), pub.sent.Load(), pub.retries.Load(), last.took.Round(time.Millisecond))

	stalls := mon.allStalls()
	checkStalls(t, p, stalls, events, outages, t0)
	recoveries(events, stalls)
	sum := checkLog(t, ctx, js, pub, oneStream)
	t.Logf("log checked: %d inputs (%d bad), %d outputs, %d dead letters %v", sum.inputs, sum.bad, sum.outputs, sum.dead, sum.reasons)
	report(t, p, events)
	d.running()
}

// createCounters creates counters c0… through the control endpoint.
func createCounters(t testing.TB, nc *nats.Conn, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("c", i)
		msg, err := nc.Request("ea.ctl.create.counter", []byte(`{"id":"`+ids[i]+`"}`), 10*time.Second)
		if err != nil {
			t.Fatalf("create counter/%s: %v", ids[i], err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Fatalf("create counter/%s: error %s: %s", ids[i], code, msg.Header.Get("Nats-Service-Error"))
		}
	}
	return ids
}

// sleep waits for d or until ctx ends: the duration of a fault.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// waitRecovered waits until r has recovered, failing the test after timeout
// with the counters still behind.
func waitRecovered(t testing.TB, ctx context.Context, mon *monitor, r *recovery, what string, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-ctx.Done():
		t.Fatalf("%s: the test timed out before every record stored was applied: %s", what, mon.behind(r))
	case <-time.After(timeout - time.Since(r.at)):
		t.Fatalf("%s: %s after it, records stored by then are still not applied: %s", what, timeout, mon.behind(r))
	}
}

// checkStalls fails the test for every stall longer than the allowance — the
// lease TTL plus 2 s — outside the time the NATS server was down: an effector
// with records waiting that applied nothing for longer. Each is reported with
// the fault before it.
func checkStalls(t testing.TB, p plan, stalls []stall, events []event, outages []outage, t0 time.Time) {
	t.Helper()
	allow := p.ttl + 2*time.Second
	if p.allow > 0 {
		allow = p.allow
	}
	f := &findings{t: t, what: "stall"}
	for _, s := range stalls {
		// Only the time after a fault cleared counts: records waiting when
		// it struck (a node killed with records in hand) or while the
		// server was down.
		from := s.from
		for _, e := range events {
			if from.Before(e.clear) && s.to.After(e.start) {
				from = later(from, e.clear)
			}
		}
		for _, o := range outages {
			if from.Before(o.to) && s.to.After(o.from) {
				from = later(from, o.to)
			}
		}
		if took := s.to.Sub(from); took > allow {
			if i := eventBefore(events, s.to); i >= 0 {
				events[i].over++
			}
			f.errorf("counter/%s had records waiting up to seq %d and applied nothing past seq %d for %s (from %s to %s after start; %s), more than the allowance %s",
				s.counter, s.want, s.applied, took.Round(time.Millisecond), from.Sub(t0).Round(time.Millisecond),
				s.to.Sub(t0).Round(time.Millisecond), faultBefore(events, s.to, t0), allow)
		}
	}
	f.done()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// eventBefore is the index of the last fault injected before at, -1 if none.
func eventBefore(events []event, at time.Time) int {
	for i := len(events) - 1; i >= 0; i-- {
		if !events[i].start.After(at) {
			return i
		}
	}
	return -1
}

// faultBefore names the last fault injected before at.
func faultBefore(events []event, at, t0 time.Time) string {
	i := eventBefore(events, at)
	if i < 0 {
		return "before any fault"
	}
	e := events[i]
	return fmt.Sprintf("after fault %d, %s of %s at %s", i+1, e.fault, e.target, e.start.Sub(t0).Round(time.Millisecond))
}

// recoveries sets each event's recovery to the time from its clear until
// the last counter stalled by it applied a record again — the end of the
// latest stall that began before the clear plus a second and ended after
// the fault struck — if that is later than every record stored at the clear
// being applied.
func recoveries(events []event, stalls []stall) {
	for i := range events {
		e := &events[i]
		for _, s := range stalls {
			if s.from.Before(e.clear.Add(time.Second)) && s.to.After(e.start) {
				e.recovery = max(e.recovery, s.to.Sub(e.clear))
			}
		}
	}
}

// report logs the recovery time per fault (p50 and max) and how many of
// each kept every counter within the allowance, and appends the table to the
// file TORTURE_REPORT names, if any.
func report(t testing.TB, p plan, events []event) {
	t.Helper()
	by := map[string][]event{}
	for _, e := range events {
		by[e.fault] = append(by[e.fault], e)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "torture %s form, %s: %d counters, %d increments/s, lease TTL %s, allowance %s\n",
		p.name, time.Now().UTC().Format(time.RFC3339), p.counters, p.rate, p.ttl, p.ttl+2*time.Second)
	fmt.Fprintf(&b, "| fault | within allowance | recovery p50 | recovery max |\n| --- | --- | --- | --- |\n")
	for _, f := range allFaults {
		es := by[f]
		if len(es) == 0 {
			continue
		}
		delete(by, f) // add-node is listed twice in a round
		ok, ds := 0, make([]time.Duration, len(es))
		for i, e := range es {
			ds[i] = e.recovery
			if e.over == 0 {
				ok++
			}
		}
		slices.Sort(ds)
		fmt.Fprintf(&b, "| %s | %d/%d | %s | %s |\n", f, ok, len(es), ds[(len(ds)-1)/2].Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond))
	}
	writeReport(t, b.String())
}

// writeReport logs a run's table and appends it to the file TORTURE_REPORT
// names, if any.
func writeReport(t testing.TB, table string) {
	t.Helper()
	t.Log("\n" + table)
	if path := os.Getenv("TORTURE_REPORT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(table + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}
