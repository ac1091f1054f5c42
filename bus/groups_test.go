package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// TestGroupNames: with one group every name is the one-stream layout's; with
// several, each partition is in group p mod G, names carry the group and
// the count, and the groups' subjects cover every partition exactly once.
func TestGroupNames(t *testing.T) {
	t.Parallel()
	n, _ := bus.NewNames("ea")
	n, _ = n.WithPartitions(10)
	if n.Groups() != 1 || n.MailboxStreamOf(0) != "EA_MBOX" || n.StateBucketOf(0) != "ea_state" {
		t.Fatalf("one group: %d, %s, %s", n.Groups(), n.MailboxStreamOf(0), n.StateBucketOf(0))
	}
	r := records.Ref{Kind: "counter", ID: "c1"}
	if n.StateSubject(r) != "$KV.ea_state.counter.c1" {
		t.Fatalf("state subject with one group: %s", n.StateSubject(r))
	}
	g, err := n.WithGroups(3)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.MailboxStreams(); !slices.Equal(got, []string{"EA_MBOX_0_OF_3", "EA_MBOX_1_OF_3", "EA_MBOX_2_OF_3"}) {
		t.Fatalf("mailbox streams %q", got)
	}
	if got := g.StateBuckets(); !slices.Equal(got, []string{"ea_state_0_of_3", "ea_state_1_of_3", "ea_state_2_of_3"}) {
		t.Fatalf("state buckets %q", got)
	}
	seen := map[string]int{}
	for grp := range 3 {
		for _, s := range g.GroupSubjects(grp) {
			seen[s]++
		}
	}
	for p := range 10 {
		if s := fmt.Sprintf("ea.mbox.%d.*.*", p); seen[s] != 1 {
			t.Fatalf("subject %s in %d groups", s, seen[s])
		}
	}
	if want := "ea_state_" + fmt.Sprint(g.Partition(r)%3) + "_of_3"; g.StateBucketFor(r) != want || g.StateSubject(r) != "$KV."+want+".counter.c1" {
		t.Fatalf("state of %s in %s (%s), want %s", r, g.StateBucketFor(r), g.StateSubject(r), want)
	}
	p := g.Partition(r)
	if got, want := g.Outbox(r), fmt.Sprintf("ea.out.%d.counter.c1", p); got != want {
		t.Fatalf("grouped outbox %s, want %s", got, want)
	}
	if got, want := g.OutboxStreamFor(r), fmt.Sprintf("EA_OUT_%d_OF_3", p%3); got != want {
		t.Fatalf("outbox stream of %s: %s, want %s", r, got, want)
	}
	if !slices.Contains(g.OutboxGroupSubjects(p%3), fmt.Sprintf("ea.out.%d.*.*", p)) || g.KindOutboxes("counter") != "ea.out.*.counter.*" {
		t.Fatalf("outbox subjects of group %d %q, kind filter %s", p%3, g.OutboxGroupSubjects(p%3), g.KindOutboxes("counter"))
	}
	if n.Outbox(r) != "ea.out.counter.c1" || n.OutboxStreamFor(r) != "EA_OUT" || n.KindOutboxes("counter") != "ea.out.counter.*" {
		t.Fatalf("one group: outbox %s in %s, kind filter %s", n.Outbox(r), n.OutboxStreamFor(r), n.KindOutboxes("counter"))
	}
	for _, subject := range []string{g.Outbox(r), n.Outbox(r)} {
		if ref, ok := g.RefOf(subject); subject == g.Outbox(r) && (!ok || ref != r) {
			t.Fatalf("RefOf(%s) = %s %v", subject, ref, ok)
		}
		if stream, filter, ok := g.Stored(subject); !ok || stream != g.OutboxStreamFor(r) || filter != g.Outbox(r) {
			t.Fatalf("Stored(%s) = %s %s %v", subject, stream, filter, ok)
		}
	}
	if _, ok := n.RefOf(g.Outbox(r)); ok {
		t.Fatalf("with one group RefOf(%s) is an outbox: the runtime never writes that form there", g.Outbox(r))
	}
	wrongOut := fmt.Sprintf("ea.out.%d.counter.c1", (p+1)%10)
	if _, ok := g.RefOf(wrongOut); ok {
		t.Fatalf("RefOf(%s) names the wrong partition and is an outbox", wrongOut)
	}
	if _, _, ok := g.Stored("ea.out.counter.*"); ok {
		t.Fatal("a grouped kind filter of outboxes is stored in one stream")
	}
	if grp, ok := g.GroupOfKey("counter.c1"); !ok || grp != g.GroupOf(r) {
		t.Fatalf("group of key: %d %v", grp, ok)
	}
	if _, ok := g.GroupOfKey("no-dot"); ok {
		t.Fatal("a key without a dot has a group")
	}
	for _, bad := range []int{0, -1, 11, bus.MaxGroups + 1} {
		if _, err := n.WithGroups(bad); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("WithGroups(%d): %v, want ErrInvalidConfig", bad, err)
		}
	}
	if _, err := g.WithPartitions(2); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("2 partitions under 3 groups: %v", err)
	}
	if err := (bus.Config{Partitions: 4, Groups: 5}).Validate(); !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "stream groups 5") {
		t.Errorf("Validate with more groups than partitions: %v", err)
	}
}

// connectEmbedded connects with an embedded server, as a node does by
// default, and provisions.
func connectEmbedded(t *testing.T, store string, cfg bus.Config) (*bus.Conn, error) {
	t.Helper()
	cfg.Listen, cfg.StoreDir, cfg.Logger = "127.0.0.1:0", store, quiet
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := conn.Provision(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// TestGroupsEmbedded: on an embedded server (the node's default) stream
// groups provision G mailbox streams and state buckets and the mapping; a
// plain publish lands in its partition's group under the partition's
// subject; a publish that names a partition itself is stored as sent and
// nowhere else; the one-stream accessors refuse; and a restart adopts the
// layout without being told.
func TestGroupsEmbedded(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	conn, err := connectEmbedded(t, store, bus.Config{Partitions: 8, Groups: 4})
	if err != nil {
		t.Fatal(err)
	}
	n := conn.Names()
	if n.Groups() != 4 {
		t.Fatalf("groups %d", n.Groups())
	}
	for g := range 4 {
		s, err := conn.MailboxStreamOf(t.Context(), g)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Subjects; !slices.Equal(got, n.GroupSubjects(g)) {
			t.Fatalf("group %d listens on %q", g, got)
		}
		if _, err := conn.StateBucketOf(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		o, err := conn.OutboxStreamOf(t.Context(), g)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.CachedInfo().Config.Subjects; !slices.Equal(got, n.OutboxGroupSubjects(g)) {
			t.Fatalf("group %d's outbox stream listens on %q", g, got)
		}
	}
	for _, name := range []string{n.MailboxStream(), n.OutboxStream(), "KV_" + n.StateBucket()} {
		if _, err := conn.JetStream().Stream(t.Context(), name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("stream %s with groups: %v, want not found", name, err)
		}
	}
	if _, err := conn.MailboxStream(t.Context()); !errors.Is(err, bus.ErrGroupsUnsupported) {
		t.Fatalf("MailboxStream with groups: %v", err)
	}
	if _, err := conn.StateBucket(t.Context()); !errors.Is(err, bus.ErrGroupsUnsupported) {
		t.Fatalf("StateBucket with groups: %v", err)
	}
	if _, err := conn.OutboxStream(t.Context()); !errors.Is(err, bus.ErrGroupsUnsupported) {
		t.Fatalf("OutboxStream with groups: %v", err)
	}
	// An effector's outbox is stored in its group; the plain outbox
	// subject is stored nowhere.
	for i := range 8 {
		r := records.Ref{Kind: "counter", ID: fmt.Sprint("o", i)}
		ack, err := conn.JetStream().Publish(t.Context(), n.Outbox(r), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Stream != n.OutboxStreamFor(r) {
			t.Fatalf("outbox of %s stored in %s, want %s", r, ack.Stream, n.OutboxStreamFor(r))
		}
		one, _ := n.WithGroups(1)
		if _, err := conn.JetStream().Publish(t.Context(), one.Outbox(r), []byte("x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("publish to %s with groups: %v, want no stream to store it", one.Outbox(r), err)
		}
	}
	// Core subscribers see the mapped subject: document it by test.
	sub, err := conn.NATS().SubscribeSync(n.Prefix() + ".mbox.>")
	if err != nil {
		t.Fatal(err)
	}
	groups := map[int]bool{}
	for i := range 40 {
		r := records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
		ack, err := conn.JetStream().Publish(t.Context(), n.Mailbox(r), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Stream != n.MailboxStreamFor(r) {
			t.Fatalf("%s stored in %s, want %s", r, ack.Stream, n.MailboxStreamFor(r))
		}
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Subject != n.StoredMailbox(r) {
			t.Fatalf("core subscriber saw %s, want %s", msg.Subject, n.StoredMailbox(r))
		}
		s, _ := conn.MailboxStreamOf(t.Context(), n.GroupOf(r))
		if _, err := s.GetMsg(t.Context(), ack.Sequence); err != nil {
			t.Fatal(err)
		}
		groups[n.GroupOf(r)] = true
	}
	if len(groups) != 4 {
		t.Fatalf("40 mailboxes in groups %v, want all 4", groups)
	}
	// A publish that bypasses the mapping with a partition token of its
	// own is stored as sent, in the group of the partition it names (whose
	// reader dead-letters a record in the wrong partition), never in
	// another group.
	r := records.Ref{Kind: "counter", ID: "x"}
	wrong := (n.Partition(r) + 1) % n.Partitions()
	ack, err := conn.JetStream().Publish(t.Context(), fmt.Sprintf("ea.mbox.%d.counter.x", wrong), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != n.PartitionStream(wrong) {
		t.Fatalf("5-token publish stored in %s, want %s", ack.Stream, n.PartitionStream(wrong))
	}
	_ = sub.Unsubscribe()
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart without saying the layout: it is adopted (and the mapping
	// is added again to the new embedded server).
	again, err := connectEmbedded(t, store, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = again.Close() }()
	if g, p := again.Names().Groups(), again.Names().Partitions(); g != 4 || p != 8 {
		t.Fatalf("adopted %d groups over %d partitions, want 4 over 8", g, p)
	}
	if ack, err := again.JetStream().Publish(t.Context(), n.Mailbox(r), []byte("x")); err != nil || ack.Stream != n.MailboxStreamFor(r) {
		t.Fatalf("publish after restart: %v %+v", err, ack)
	}
}

// TestGroupsRefuseChange: the group count is fixed at provisioning like the
// partition count; going from one stream to groups says it is a migration.
func TestGroupsRefuseChange(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	one, err := connectEmbedded(t, store, bus.Config{Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	_ = one.Close()
	_, err = connectEmbedded(t, store, bus.Config{Partitions: 8, Groups: 2})
	if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "migration") || !strings.Contains(err.Error(), "--migrate and --stream-groups 2") {
		t.Fatalf("one stream to 2 groups: %v, want an error saying it is a migration", err)
	}
	store = t.TempDir()
	four, err := connectEmbedded(t, store, bus.Config{Partitions: 8, Groups: 4})
	if err != nil {
		t.Fatal(err)
	}
	_ = four.Close()
	for _, g := range []int{1, 2} {
		_, err = connectEmbedded(t, store, bus.Config{Partitions: 8, Groups: g})
		if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "fixed at provisioning") {
			t.Fatalf("4 groups to %d: %v", g, err)
		}
	}
	_, err = connectEmbedded(t, store, bus.Config{Partitions: 16, Groups: 4})
	if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "partitions") {
		t.Fatalf("other partitions under groups: %v", err)
	}
}

// TestGroupsNeedTheMapping: against a server without the account mapping
// (an outside server whose operator did not configure it) provisioning
// groups fails and says what to configure; with the mapping it succeeds.
func TestGroupsNeedTheMapping(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{Partitions: 8, Groups: 2})
	err := conn.Provision(t.Context())
	src, dest := conn.Names().MailboxMapping()
	if !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "mappings = {") || !strings.Contains(err.Error(), dest) {
		t.Fatalf("provision without the mapping: %v", err)
	}
	srv.MapMailboxes(t, conn.Names())
	if err := conn.Provision(t.Context()); err != nil {
		t.Fatalf("provision with mapping %s -> %s: %v", src, dest, err)
	}
	// The probe stored nothing.
	for g := range 2 {
		s, err := conn.MailboxStreamOf(t.Context(), g)
		if err != nil {
			t.Fatal(err)
		}
		if msgs := s.CachedInfo().State.Msgs; msgs != 0 {
			t.Fatalf("group %d holds %d records after the probes", g, msgs)
		}
	}
}

// TestCheckLayout: a connection told the layout is checked against the
// deployment's; counts left unset are not compared, nothing provisioned
// is no error.
func TestCheckLayout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := bustest.NewServer(t)
	empty, err := bus.Connect(ctx, bus.Config{URL: srv.URL, Groups: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if err := empty.CheckLayout(ctx); err != nil {
		t.Fatalf("nothing provisioned: %v", err)
	}
	srv.MapPartitions(t, 8)
	srv.Connect(t, bus.Config{Partitions: 8, Groups: 2}) // provisions
	for _, tc := range []struct {
		cfg   bus.Config
		wrong string // "": the layout fits
	}{
		{bus.Config{}, ""},
		{bus.Config{Groups: 2, Partitions: 8}, ""},
		{bus.Config{Groups: 2}, ""},
		{bus.Config{Partitions: 8}, ""},
		{bus.Config{Groups: 3, Partitions: 8}, "configured for 3 stream groups:"},
		{bus.Config{Groups: 2, Partitions: 16}, "configured for 16 partitions:"},
		{bus.Config{Groups: 4, Partitions: 16}, "configured for 4 stream groups and 16 partitions:"},
	} {
		cfg := tc.cfg
		cfg.URL = srv.URL
		c, err := bus.Connect(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = c.CheckLayout(ctx)
		c.Close()
		switch {
		case tc.wrong == "" && err != nil:
			t.Errorf("groups %d, partitions %d: %v", tc.cfg.Groups, tc.cfg.Partitions, err)
		case tc.wrong != "" && (!errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wrong) || !strings.Contains(err.Error(), "has 2 stream groups and 8 mailbox partitions")):
			t.Errorf("groups %d, partitions %d: %v, want ErrInvalidConfig naming the deployment's layout and %q", tc.cfg.Groups, tc.cfg.Partitions, err, tc.wrong)
		}
	}
}
