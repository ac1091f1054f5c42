package bus_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestPartitionTransform: a plain publish to <prefix>.mbox.<kind>.<id> is
// stored under the partition Names.Partition computes, and a core NATS
// subscriber of the mailbox sees the subject as published.
func TestPartitionTransform(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{})
	if err := conn.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	names := conn.Names()
	sub, err := conn.NATS().SubscribeSync(names.Prefix() + ".mbox.>")
	if err != nil {
		t.Fatal(err)
	}
	stream, err := conn.MailboxStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	parts := map[int]bool{}
	for i := range 200 {
		r := records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
		ack, err := conn.JetStream().Publish(t.Context(), names.Mailbox(r), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := stream.GetMsg(t.Context(), ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Subject != names.StoredMailbox(r) {
			t.Fatalf("%s stored as %s; Names says %s", r, msg.Subject, names.StoredMailbox(r))
		}
		got, p, ok := names.StoredMailboxOf(msg.Subject)
		if !ok || got != r || p != names.Partition(r) {
			t.Fatalf("StoredMailboxOf(%s) = %v, %d, %v", msg.Subject, got, p, ok)
		}
		if back, ok := names.RefOf(msg.Subject); !ok || back != r {
			t.Fatalf("RefOf(%s) = %v, %v", msg.Subject, back, ok)
		}
		core, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if core.Subject != names.Mailbox(r) {
			t.Fatalf("core subscriber saw %s, want %s", core.Subject, names.Mailbox(r))
		}
		parts[p] = true
	}
	if len(parts) < bus.DefaultPartitions/2 {
		t.Fatalf("200 mailboxes landed in %d partitions of %d: the hash does not spread", len(parts), bus.DefaultPartitions)
	}
}

// TestMailboxSubjectsOutsideTheContract: the mailbox stream takes
// <prefix>.mbox.<kind>.<id> only; a publish with fewer or more tokens (a
// forged partition token among them) is refused, so nothing is stored that no
// effector would ever process.
func TestMailboxSubjectsOutsideTheContract(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{})
	if err := conn.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"ea.mbox.counter", "ea.mbox.counter.c1.extra", "ea.mbox.3.counter.c1"} {
		msg := nats.NewMsg(subject)
		msg.Data = []byte("x")
		reply, err := conn.NATS().RequestMsg(msg, 2*time.Second)
		if err == nil {
			t.Fatalf("publish to %s: stored (%s); want no stream to take it", subject, reply.Data)
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("publish to %s: %v", subject, err)
		}
	}
	stream, err := conn.MailboxStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(t.Context()); err != nil || info.State.Msgs != 0 {
		t.Fatalf("mailbox stream holds %v messages (err %v); want 0", info.State.Msgs, err)
	}
}

// TestPartitionsFixedAtProvisioning: connecting with another partition count
// to a provisioned deployment is refused with a clear error, at Provision and
// when the mailbox stream is opened.
func TestPartitionsFixedAtProvisioning(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	first := connect(t, srv, bus.Config{Partitions: 16})
	if err := first.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	other := connect(t, srv, bus.Config{Partitions: 32})
	err := other.Provision(t.Context())
	if !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("Provision with 32 partitions over 16 = %v; want ErrInvalidConfig", err)
	}
	for _, want := range []string{"16 mailbox partitions", "configured for 32"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := other.MailboxStream(t.Context()); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("MailboxStream with 32 partitions over 16 = %v; want ErrInvalidConfig", err)
	}
	if err := (bus.Config{Partitions: bus.MaxPartitions + 1}).Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("Validate(partitions %d) = %v; want ErrInvalidConfig", bus.MaxPartitions+1, err)
	}
}

// TestLegacyLayoutRefusedThenMigrated: a store of the previous layout
// (EA_RECORDS holding mailboxes and outboxes) is refused with what to do;
// Migrate keeps its records readable, and the mailbox stream then starts
// after its last sequence, so state documents' seq never skips a new record.
func TestLegacyLayoutRefusedThenMigrated(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{})
	ctx := t.Context()
	if _, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{
		Name: "EA_RECORDS", Subjects: []string{"ea.mbox.>", "ea.out.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := conn.JetStream().Publish(ctx, fmt.Sprint("ea.mbox.counter.c", i), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.JetStream().CreateConsumer(ctx, "EA_RECORDS", jetstream.ConsumerConfig{Durable: "counter~c1~n1", FilterSubject: "ea.mbox.counter.c1"}); err != nil {
		t.Fatal(err)
	}
	err := conn.Provision(ctx)
	if !errors.Is(err, bus.ErrLegacyLayout) {
		t.Fatalf("Provision over EA_RECORDS = %v; want ErrLegacyLayout", err)
	}
	for _, want := range []string{"EA_RECORDS", "--migrate", "last sequence 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for range 2 { // migrating twice is fine
		if err := conn.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Provision(ctx); err != nil {
		t.Fatalf("Provision after Migrate: %v", err)
	}
	legacy, err := conn.JetStream().Stream(ctx, "EA_RECORDS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := legacy.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 5 || !slices.Equal(info.Config.Subjects, []string{"ea.legacy.>"}) || info.State.Consumers != 0 {
		t.Fatalf("EA_RECORDS after Migrate: %d records, subjects %q, %d consumers; want 5, [ea.legacy.>], 0", info.State.Msgs, info.Config.Subjects, info.State.Consumers)
	}
	ack, err := conn.JetStream().Publish(ctx, "ea.mbox.counter.c0", []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != "EA_MBOX" || ack.Sequence <= 5 {
		t.Fatalf("first record after Migrate: stream %s seq %d; want EA_MBOX after 5", ack.Stream, ack.Sequence)
	}
}

func TestStored(t *testing.T) {
	t.Parallel()
	n, err := bus.NewNames("ea")
	if err != nil {
		t.Fatal(err)
	}
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	tests := []struct {
		subject, stream, filter string
		ok                      bool
	}{
		{"ea.mbox.counter.c1", "EA_MBOX", n.StoredMailbox(c1), true},
		{"ea.mbox.counter.*", "EA_MBOX", "ea.mbox.*.counter.*", true},
		{"ea.mbox.counter.>", "EA_MBOX", "ea.mbox.*.counter.>", true},
		{"ea.mbox.>", "EA_MBOX", "ea.mbox.>", true},
		{"ea.out.counter.c1", "EA_OUT", "ea.out.counter.c1", true},
		{"ea.out.>", "EA_OUT", "ea.out.>", true},
		{"ea.dead.counter.c1", "EA_DEAD", "ea.dead.counter.c1", true},
		{"ea.mbox.counter", "", "", false},
		{"ea.ctl.create.counter", "", "", false},
		{"other.mbox.counter.c1", "", "", false},
	}
	for _, tt := range tests {
		stream, filter, ok := n.Stored(tt.subject)
		if stream != tt.stream || filter != tt.filter || ok != tt.ok {
			t.Errorf("Stored(%q) = %q, %q, %v; want %q, %q, %v", tt.subject, stream, filter, ok, tt.stream, tt.filter, tt.ok)
		}
	}
}
