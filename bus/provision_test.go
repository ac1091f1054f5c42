package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/nats-io/nats.go/jetstream"
)

// connect connects to srv with cfg without provisioning; Close runs at cleanup.
func connect(t *testing.T, srv *bustest.Server, cfg bus.Config) *bus.Conn {
	t.Helper()
	cfg.URL = srv.URL
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return conn
}

// want is what a provisioned deployment must look like.
type want struct {
	prefix          string
	duplicateWindow time.Duration
	maxAge          time.Duration
	maxConsumers    int
	stateHistory    int64
}

// checkProvisioned fails t unless the streams and buckets of w are in place.
func checkProvisioned(t *testing.T, js jetstream.JetStream, w want) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	names, err := bus.NewNames(w.prefix)
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{names.MailboxStream(), names.OutboxStream()} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		rc := s.CachedInfo().Config
		wantSubjects := []string{w.prefix + ".out.>"}
		if name == names.MailboxStream() {
			wantSubjects = []string{w.prefix + ".mbox.*.*"}
			if rc.SubjectTransform == nil || rc.SubjectTransform.Source != w.prefix+".mbox.*.*" ||
				rc.SubjectTransform.Destination != w.prefix+".mbox.{{partition(64,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}" {
				t.Errorf("%s transform = %+v; want the partitioning transform", name, rc.SubjectTransform)
			}
		}
		if !slices.Equal(rc.Subjects, wantSubjects) {
			t.Errorf("%s subjects = %q; want %q", name, rc.Subjects, wantSubjects)
		}
		if rc.Retention != jetstream.LimitsPolicy {
			t.Errorf("%s retention = %v; want limits", name, rc.Retention)
		}
		if rc.Storage != jetstream.FileStorage {
			t.Errorf("%s storage = %v; want file", name, rc.Storage)
		}
		if rc.Duplicates != w.duplicateWindow {
			t.Errorf("%s duplicate window = %s; want %s", name, rc.Duplicates, w.duplicateWindow)
		}
		if rc.MaxAge != w.maxAge {
			t.Errorf("%s max age = %s; want %s", name, rc.MaxAge, w.maxAge)
		}
		if rc.MaxConsumers != w.maxConsumers {
			t.Errorf("%s max consumers = %d; want %d", name, rc.MaxConsumers, w.maxConsumers)
		}
		if rc.Replicas != 1 {
			t.Errorf("%s replicas = %d; want 1", name, rc.Replicas)
		}
	}

	d, err := js.Stream(ctx, names.DeadStream())
	if err != nil {
		t.Fatalf("dead stream: %v", err)
	}
	dc := d.CachedInfo().Config
	if got, want := dc.Subjects, []string{w.prefix + ".dead.>"}; !slices.Equal(got, want) {
		t.Errorf("dead subjects = %q; want %q", got, want)
	}
	if dc.Retention != jetstream.LimitsPolicy || dc.Storage != jetstream.FileStorage {
		t.Errorf("dead retention/storage = %v/%v; want limits/file", dc.Retention, dc.Storage)
	}

	for bucket, history := range map[string]int64{names.StateBucket(): w.stateHistory, names.OrchBucket(): 5, names.PlaceBucket(): 1} {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Errorf("bucket %s: %v", bucket, err)
			continue
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Errorf("bucket %s status: %v", bucket, err)
			continue
		}
		if st.History() != history {
			t.Errorf("bucket %s history = %d; want %d", bucket, st.History(), history)
		}
		if st.BackingStore() != "JetStream" {
			t.Errorf("bucket %s backing store = %q", bucket, st.BackingStore())
		}
	}
}

// streamNames lists the streams on the server, sorted.
func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var names []string
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		names = append(names, name)
	}
	if err := lister.Err(); err != nil {
		t.Fatalf("list streams: %v", err)
	}
	slices.Sort(names)
	return names
}

func TestProvisionDefaults(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{})
	if err := conn.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkProvisioned(t, conn.JetStream(), want{prefix: "ea", duplicateWindow: 2 * time.Minute, maxConsumers: 1_000_000, stateHistory: 5})
	if got, want := streamNames(t, conn.JetStream()), []string{"EA_DEAD", "EA_MBOX", "EA_OUT", "EA_TIMERS", "KV_ea_orch", "KV_ea_place", "KV_ea_state"}; !slices.Equal(got, want) {
		t.Errorf("streams = %q; want %q", got, want)
	}

	// The accessors find what was provisioned.
	s, err := conn.MailboxStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s.CachedInfo().Config.Name != "EA_MBOX" {
		t.Errorf("MailboxStream() = %s; want EA_MBOX", s.CachedInfo().Config.Name)
	}
	o, err := conn.OutboxStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if o.CachedInfo().Config.Name != "EA_OUT" {
		t.Errorf("OutboxStream() = %s; want EA_OUT", o.CachedInfo().Config.Name)
	}
	kv, err := conn.StateBucket(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if kv.Bucket() != "ea_state" {
		t.Errorf("StateBucket() = %s; want ea_state", kv.Bucket())
	}
}

func TestProvisionConfigured(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	cfg := bus.Config{DuplicateWindow: 90 * time.Second, MaxAge: time.Hour, MaxConsumers: 5000, StateHistory: 12}
	conn := connect(t, srv, cfg)
	w := want{prefix: "ea", duplicateWindow: 90 * time.Second, maxAge: time.Hour, maxConsumers: 5000, stateHistory: 12}
	for i := range 2 { // provisioning again changes nothing and is no error
		if err := conn.Provision(t.Context()); err != nil {
			t.Fatalf("Provision #%d: %v", i+1, err)
		}
		checkProvisioned(t, conn.JetStream(), w)
	}

	// A later deployment with another configuration updates the streams and
	// buckets in place, keeping what they hold.
	if _, err := conn.JetStream().Publish(t.Context(), "ea.mbox.echo.1", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	cfg2 := bus.Config{DuplicateWindow: time.Minute, MaxConsumers: 7000, StateHistory: 3}
	conn2 := connect(t, srv, cfg2)
	if err := conn2.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	// No age given: the streams keep theirs (bus.Retention).
	checkProvisioned(t, conn.JetStream(), want{prefix: "ea", duplicateWindow: time.Minute, maxAge: time.Hour, maxConsumers: 7000, stateHistory: 3})
	s, err := conn.MailboxStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("records stream holds %d messages after re-provisioning; want 1", info.State.Msgs)
	}
}

func TestProvisionConcurrent(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	cfg := bus.Config{DuplicateWindow: 3 * time.Minute, MaxConsumers: 20_000, StateHistory: 9}
	const nodes = 8
	conns := make([]*bus.Conn, nodes)
	for i := range conns {
		conns[i] = connect(t, srv, cfg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := make(chan struct{})
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			<-start
			errs[i] = conn.Provision(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: Provision: %v", i, err)
		}
	}
	checkProvisioned(t, conns[0].JetStream(), want{prefix: "ea", duplicateWindow: 3 * time.Minute, maxConsumers: 20_000, stateHistory: 9})
	if got, want := streamNames(t, conns[0].JetStream()), []string{"EA_DEAD", "EA_MBOX", "EA_OUT", "EA_TIMERS", "KV_ea_orch", "KV_ea_place", "KV_ea_state"}; !slices.Equal(got, want) {
		t.Errorf("streams = %q; want %q", got, want)
	}
}

func TestProvisionCustomPrefix(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	ea := connect(t, srv, bus.Config{})
	acme := connect(t, srv, bus.Config{Prefix: "acme", StateHistory: 2})
	for _, conn := range []*bus.Conn{ea, acme} {
		if err := conn.Provision(t.Context()); err != nil {
			t.Fatalf("Provision %s: %v", conn.Names().Prefix(), err)
		}
	}
	// Two deployments share the server without touching each other.
	checkProvisioned(t, ea.JetStream(), want{prefix: "ea", duplicateWindow: 2 * time.Minute, maxConsumers: 1_000_000, stateHistory: 5})
	checkProvisioned(t, acme.JetStream(), want{prefix: "acme", duplicateWindow: 2 * time.Minute, maxConsumers: 1_000_000, stateHistory: 2})
	want := []string{"ACME_DEAD", "ACME_MBOX", "ACME_OUT", "ACME_TIMERS", "EA_DEAD", "EA_MBOX", "EA_OUT", "EA_TIMERS", "KV_acme_orch", "KV_acme_place", "KV_acme_state", "KV_ea_orch", "KV_ea_place", "KV_ea_state"}
	if got := streamNames(t, ea.JetStream()); !slices.Equal(got, want) {
		t.Errorf("streams = %q; want %q", got, want)
	}
	if acme.Names().MailboxStream() != "ACME_MBOX" || acme.Names().StateBucket() != "acme_state" {
		t.Errorf("acme names: %s, %s", acme.Names().MailboxStream(), acme.Names().StateBucket())
	}
}

func TestProvisionRefusesCollidingPrefix(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	first := connect(t, srv, bus.Config{Prefix: "a-b"})
	if err := first.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"a_b", "A-B"} { // both name their stream A_B_MBOX
		t.Run(prefix, func(t *testing.T) {
			other := connect(t, srv, bus.Config{Prefix: prefix})
			if got := other.Names().MailboxStream(); got != first.Names().MailboxStream() {
				t.Fatalf("MailboxStream() = %s; the test wants a collision with %s", got, first.Names().MailboxStream())
			}
			err := other.Provision(t.Context())
			if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "a-b.mbox.*.*") {
				t.Fatalf("Provision(%q) over a-b's streams = %v; want an invalid-config error naming the subject in the way", prefix, err)
			}
		})
	}
	// The first deployment still owns its streams.
	if _, err := first.JetStream().Publish(t.Context(), "a-b.mbox.echo.1", nil); err != nil {
		t.Fatalf("publish to a-b after the refused provisioning: %v", err)
	}
	checkProvisioned(t, first.JetStream(), want{prefix: "a-b", duplicateWindow: 2 * time.Minute, maxConsumers: 1_000_000, stateHistory: 5})
}

func TestProvisionReplicasOnSingleServer(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{Replicas: 3})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := conn.Provision(ctx)
	if err == nil {
		t.Fatal("Provision with 3 replicas on one server succeeded")
	}
	t.Logf("Provision with 3 replicas on one server: %v (after %s)", err, time.Since(start))
	for _, want := range []string{"EA_MBOX", "replicas", "cluster of at least 3 servers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("error %v does not match bus.ErrInvalidConfig", err)
	}
	if got := streamNames(t, conn.JetStream()); len(got) != 0 {
		t.Errorf("streams after the failed Provision = %q; want none", got)
	}
}

// createConsumers creates durable pull consumers name-<i> for i in [from, to)
// on stream, each filtering subject-prefix.<i>, with a few parallel creators.
// It returns the first error for each i that failed.
func createConsumers(ctx context.Context, s jetstream.Stream, subjectPrefix string, from, to int) map[int]error {
	var (
		mu   sync.Mutex
		errs = map[int]error{}
		next atomic.Int64
		wg   sync.WaitGroup
	)
	next.Store(int64(from))
	for range 4 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				_, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
					Durable:       fmt.Sprintf("c%d", i),
					FilterSubject: fmt.Sprintf("%s.%d", subjectPrefix, i),
					AckPolicy:     jetstream.AckExplicitPolicy,
					MemoryStorage: true,
				})
				if err != nil {
					mu.Lock()
					errs[i] = err
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// TestProvisionLiftsConsumerLimit shows why the records stream sets
// MaxConsumers: nats-server caps a stream that does not at 1,000 consumers,
// and every effector is one.
// Not parallel: thousands of consumers within a deadline, near the race
// detector's goroutine limit.
func TestProvisionLiftsConsumerLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 2,200 consumers")
	}
	srv := bustest.NewServer(t)
	conn := srv.Connect(t, bus.Config{Logger: quiet})
	// A deadline, not a wait: 2,200 consumer creations take seconds on an
	// idle machine, minutes on a loaded one.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// A stream without MaxConsumers takes 1,000 and refuses the 1,001st.
	plain, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if errs := createConsumers(ctx, plain, "plain", 0, 1000); len(errs) > 0 {
		t.Fatalf("%d of the first 1,000 consumers on a plain stream failed, e.g. %v", len(errs), anyErr(errs))
	}
	errs := createConsumers(ctx, plain, "plain", 1000, 1001)
	if !errors.Is(errs[1000], jetstream.ErrMaximumConsumersLimit) {
		t.Fatalf("consumer 1,001 on a stream without MaxConsumers: %v; want ErrMaximumConsumersLimit", errs[1000])
	}
	// Free the server (and the race detector's goroutine budget) first.
	if err := conn.JetStream().DeleteStream(ctx, "PLAIN"); err != nil {
		t.Fatal(err)
	}

	// The provisioned mailbox stream takes 1,200.
	s, err := conn.MailboxStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if errs := createConsumers(ctx, s, "ea.mbox.0.k", 0, 1200); len(errs) > 0 {
		t.Fatalf("%d of 1,200 consumers on the mailbox stream failed, e.g. %v", len(errs), anyErr(errs))
	}
	t.Logf("created 1,200 consumers on the mailbox stream in %s", time.Since(start))
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 1200 {
		t.Errorf("mailbox stream has %d consumers; want 1,200", info.State.Consumers)
	}
}

// anyErr returns one of errs.
func anyErr(errs map[int]error) error {
	for _, err := range errs {
		return err
	}
	return nil
}
