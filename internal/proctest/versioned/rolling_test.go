package versioned_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/internal/proctest/versioned"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// bins are the node binaries of each version, built once in TestMain.
var bins struct{ v1, v2 string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "versioned")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.v1, bins.v2 = filepath.Join(dir, "tally-v1"), filepath.Join(dir, "tally-v2")
	err = proctest.Build(bins.v1, "./v1")
	if err == nil {
		err = proctest.Build(bins.v2, "./v2")
	}
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// member is a node process and its metrics address.
type member struct {
	*proctest.Proc
	metrics string
}

// startMember starts node binary bin as node id on the server at url and
// waits until it is ready.
func startMember(t *testing.T, bin, id, url string) *member {
	t.Helper()
	m := &member{metrics: proctest.FreeAddr(t)}
	args := []string{"--nats", url, "--metrics", m.metrics, "--node-id", id,
		"--heartbeat", "500ms", "--heartbeat-ttl", "3s", "--shutdown-grace", "5s"}
	m.Proc = proctest.Start(t, id, bin, args, proctest.Environ("EA_"))
	m.WaitHTTP(t, 90*time.Second, "http://"+m.metrics+"/readyz")
	return m
}

// metric sums the series of the counter or gauge name (kind tally, or no
// kind label) that the member's /metrics shows.
func (m *member) metric(t *testing.T, name string) float64 {
	t.Helper()
	code, body := proctest.Get("http://" + m.metrics + "/metrics")
	if code != 200 {
		t.Fatalf("%s /metrics: %d %s", m.Name, code, body)
	}
	var sum float64
	for line := range strings.SplitSeq(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if rest[0] == '{' && strings.Contains(rest, "kind=") && !strings.Contains(rest, `kind="`+versioned.Name+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", m.Name, line, err)
		}
		sum += v
	}
	return sum
}

// load sends inc records to every effector, one round after another, until
// stopped, and counts those the server acknowledged per effector.
type load struct {
	conn *bus.Conn
	refs []records.Ref

	mu   sync.Mutex
	sent []int
	err  error

	stop context.CancelFunc
	done chan struct{}
}

func startLoad(conn *bus.Conn, refs []records.Ref, every time.Duration) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{conn: conn, refs: refs, sent: make([]int, len(refs)), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if err := l.round(); err != nil {
				l.mu.Lock()
				l.err = err
				l.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// round publishes one record to each effector and waits for the acks.
func (l *load) round() error {
	names := l.conn.Names()
	futures := make([]jetstream.PubAckFuture, len(l.refs))
	for i, r := range l.refs {
		rec, err := records.New("inc", nil)
		if err != nil {
			return err
		}
		if futures[i], err = l.conn.JetStream().PublishMsgAsync(rec.Msg(names.Mailbox(r))); err != nil {
			return fmt.Errorf("publish to %s: %w", r, err)
		}
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", l.refs[i], err)
		case <-time.After(time.Minute):
			return fmt.Errorf("publish to %s: no ack in 1m", l.refs[i])
		}
		l.mu.Lock()
		l.sent[i]++
		l.mu.Unlock()
	}
	return nil
}

// end stops the load and returns what was sent to each effector.
func (l *load) end(t *testing.T) []int {
	t.Helper()
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	return append([]int(nil), l.sent...)
}

// total is how many records were acknowledged so far.
func (l *load) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.sent {
		n += s
	}
	return n
}

// stored reads r's state document and its count at its version.
func stored(t *testing.T, bucket jetstream.KeyValue, names bus.Names, r records.Ref) (actor.Document, int) {
	t.Helper()
	ent, err := bucket.Get(context.Background(), names.StateKey(r))
	if err != nil {
		t.Fatalf("state of %s: %v", r, err)
	}
	var doc actor.Document
	if err := codec.Unmarshal(ent.Value(), &doc); err != nil {
		t.Fatal(err)
	}
	switch doc.StateVersion() {
	case 1:
		var s versioned.StateV1
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return doc, s.N
	case 2:
		var s versioned.StateV2
		if err := doc.Decode(&s); err != nil {
			t.Fatal(err)
		}
		return doc, s.Count
	}
	t.Fatalf("%s: state version %d", r, doc.StateVersion())
	return doc, 0
}

// TestRollingUpgrade runs node binaries of kind tally at state versions 1
// and 2 over one NATS server under a steady load, through a rolling upgrade
// with a setback:
//
//  1. a (v1) alone: every document at version 1;
//  2. b (v2) joins and takes part of the partitions: it upgrades the
//     documents of its effectors (ea_state_upgrades_total);
//  3. b is killed: a takes its partitions back and meets documents of
//     version 2, which it refuses (ea_state_version_refusals_total, a WARN
//     line): their records wait;
//  4. c (v2) joins, then a stops: c reads every partition.
//
// At the end every document is at version 2 and every effector's count is
// exactly the number of records the server acknowledged for it (none
// lost, none applied twice, none overwritten by the older node), and there
// is no dead letter.
func TestRollingUpgrade(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	names := conn.Names()
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const effectors = 64
	refs := make([]records.Ref, effectors)
	for i := range refs {
		refs[i] = records.Ref{Kind: versioned.Name, ID: fmt.Sprintf("t%02d", i)}
	}

	a := startMember(t, bins.v1, "a", srv.URL)
	client, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if _, err := client.Create(ctx, r, nil); err != nil {
			t.Fatalf("create %s: %v", r, err)
		}
	}
	ld := startLoad(conn, refs, 100*time.Millisecond)
	defer ld.stop()
	actortest.Eventually(t, 2*time.Minute, "every effector counting at version 1", func() bool {
		for _, r := range refs {
			if doc, n := stored(t, bucket, names, r); doc.StateVersion() != 1 || n == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("1. a (v1) alone: %d records sent so far", ld.total())

	b := startMember(t, bins.v2, "b", srv.URL)
	actortest.Eventually(t, 2*time.Minute, "b upgrading documents", func() bool {
		return b.metric(t, "ea_state_upgrades_total") >= 5
	})
	upgradedByB := 0
	for _, r := range refs {
		if doc, _ := stored(t, bucket, names, r); doc.StateVersion() == 2 {
			upgradedByB++
		}
	}
	if upgradedByB == 0 || upgradedByB == effectors {
		t.Fatalf("%d of %d documents at version 2 with a and b running: want b to hold a part", upgradedByB, effectors)
	}
	t.Logf("2. b (v2) joined: %d documents upgraded; %d records sent so far", upgradedByB, ld.total())

	if err := b.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.Wait(t, 30*time.Second)
	actortest.Eventually(t, 2*time.Minute, "a refusing documents of version 2", func() bool {
		return a.metric(t, "ea_state_version_refusals_total") >= 1
	})
	actortest.Eventually(t, 30*time.Second, "a's WARN line", func() bool {
		return strings.Contains(a.Stderr.String(), "state document written by a newer version of the kind")
	})
	t.Logf("3. b killed: a refused %v documents; %d records sent so far", a.metric(t, "ea_state_version_refusals_total"), ld.total())
	if got := a.metric(t, "ea_dead_letters_total"); got != 0 {
		t.Fatalf("a sent %v records to dead letters", got)
	}
	atV2 := 0
	for _, r := range refs {
		if doc, _ := stored(t, bucket, names, r); doc.StateVersion() == 2 {
			atV2++
		}
	}
	if atV2 < upgradedByB {
		t.Fatalf("%d documents at version 2 after a took b's partitions, %d before: a wrote over documents of version 2", atV2, upgradedByB)
	}

	c := startMember(t, bins.v2, "c", srv.URL)
	refusedByA := a.metric(t, "ea_state_version_refusals_total")
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.Wait(t, time.Minute); code != 0 {
		t.Fatalf("a exited with %d", code)
	}
	before := c.metric(t, "ea_records_processed_total")
	actortest.Eventually(t, 2*time.Minute, "c processing after a left", func() bool {
		return c.metric(t, "ea_records_processed_total") >= before+5*effectors
	})
	sent := ld.end(t)
	total := 0
	for _, n := range sent {
		total += n
	}
	t.Logf("4. c (v2) joined, a stopped: %d records sent in all", total)

	actortest.Eventually(t, 3*time.Minute, "every document at version 2 with its exact count", func() bool {
		for i, r := range refs {
			doc, n := stored(t, bucket, names, r)
			if doc.StateVersion() != 2 || n != sent[i] {
				return false
			}
		}
		return true
	})
	for i, r := range refs {
		if doc, n := stored(t, bucket, names, r); n != sent[i] || doc.Version != 2 || doc.Status != actor.StatusIdle {
			t.Fatalf("%s: count %d at version %d status %s, want %d at 2, IDLE", r, n, doc.Version, doc.Status, sent[i])
		}
	}
	dead, err := conn.JetStream().Stream(ctx, names.DeadStream())
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}
	if dead != nil {
		info, err := dead.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 0 {
			t.Fatalf("%d dead letters", info.State.Msgs)
		}
	}
	if got := c.metric(t, "ea_state_version_refusals_total"); got != 0 {
		t.Fatalf("c (v2) refused %v documents", got)
	}
	t.Logf("done: %d effectors at version 2, %d records applied exactly once; a refused %v times, c upgraded %v documents",
		effectors, total, refusedByA, c.metric(t, "ea_state_upgrades_total"))
}
