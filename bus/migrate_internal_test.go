package bus

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// TestGroupsMigrationResumes: a migration to stream groups interrupted
// after its first copies resumes where it stopped when run again: every
// record its effector's document does not count as applied is copied once,
// in order, and nothing else.
func TestGroupsMigrationResumes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	one, err := Connect(ctx, Config{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Partitions: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = one.Close() }()
	if err := one.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	const effectors, per, appliedPer = 8, 5, 2
	refs := make([]records.Ref, effectors)
	seqs := map[records.Ref][]uint64{}
	ids := map[uint64]string{} // by sequence: the id published, "" for none
	for i := range refs {
		refs[i] = records.Ref{Kind: "counter", ID: fmt.Sprint("c", i)}
	}
	for range per {
		for _, r := range refs {
			msg := nats.NewMsg(one.Names().Mailbox(r))
			id := ""
			if len(seqs[r])%2 == 0 { // half without an id: the copy gets s<seq>
				id = records.NewID()
				msg.Header.Set(records.HeaderID, id)
			}
			ack, err := one.JetStream().PublishMsg(ctx, msg)
			if err != nil {
				t.Fatal(err)
			}
			seqs[r] = append(seqs[r], ack.Sequence)
			ids[ack.Sequence] = id
		}
	}
	states, err := one.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for _, r := range refs {
		doc, _ := msgpack.Marshal(map[string]any{"kind": r.Kind, "id": r.ID, "seq": seqs[r][appliedPer-1]})
		if _, err := states.Put(ctx, one.Names().StateKey(r), doc); err != nil {
			t.Fatal(err)
		}
		for _, s := range seqs[r][appliedPer:] {
			want[s] = true
		}
	}

	grouped, err := Connect(ctx, Config{URL: one.server.ClientURL(), Partitions: 4, Groups: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = grouped.Close() }()
	// The first steps of a migration, then 3 copies, then it "crashes".
	old, err := grouped.JetStream().Stream(ctx, grouped.Names().MailboxStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := grouped.retireMailbox(ctx, old); err != nil {
		t.Fatal(err)
	}
	old, _ = grouped.JetStream().Stream(ctx, grouped.Names().MailboxStream())
	last := old.CachedInfo().State.LastSeq
	groups, err := grouped.groupStreamsAfter(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grouped.copyStates(ctx, states); err != nil {
		t.Fatal(err)
	}
	cons, err := old.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	docs := map[records.Ref]applied{}
	for copied := 0; copied < 3; {
		msg, err := cons.Next()
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := msg.Metadata()
		ok, err := grouped.copyRecord(ctx, grouped.JetStream(), msg, meta.Sequence.Stream, groups, states, docs)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			copied++
		}
	}

	if err := grouped.MigrateGroups(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	got := map[uint64]bool{}
	lastOf := map[records.Ref]uint64{}
	for g, s := range groups {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs > 0 && info.State.FirstSeq <= last {
			t.Fatalf("group %d starts at %d, at or below %d", g, info.State.FirstSeq, last)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			stream, from, _ := strings.Cut(m.Header.Get(HeaderMigratedFrom), ":")
			orig, err := strconv.ParseUint(from, 10, 64)
			if err != nil || stream != "EA_MBOX" {
				t.Fatalf("copy %d of group %d: %s %q", seq, g, HeaderMigratedFrom, m.Header.Get(HeaderMigratedFrom))
			}
			if got[orig] {
				t.Fatalf("record %d copied twice", orig)
			}
			got[orig] = true
			ref, p, _ := grouped.Names().StoredMailboxOf(m.Subject)
			if grouped.Names().Group(p) != g || grouped.Names().Partition(ref) != p {
				t.Fatalf("record %d (%s) in group %d", orig, m.Subject, g)
			}
			if orig <= lastOf[ref] {
				t.Fatalf("%s: record %d copied after %d", ref, orig, lastOf[ref])
			}
			lastOf[ref] = orig
			wantID := ids[orig]
			if wantID == "" {
				wantID = "s" + strconv.FormatUint(orig, 10)
			}
			if id := m.Header.Get(records.HeaderID); id != wantID {
				t.Fatalf("copy of %d has id %q, want %q", orig, id, wantID)
			}
			if d := m.Header.Get(jetstream.ExpectedStreamHeader); d != "" {
				t.Fatalf("copy of %d keeps the directive %s: %s", orig, jetstream.ExpectedStreamHeader, d)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d records copied, want the %d unapplied", len(got), len(want))
	}
	for s := range want {
		if !got[s] {
			t.Fatalf("unapplied record %d not copied", s)
		}
	}
	if err := grouped.MigrateGroups(ctx); err != nil {
		t.Fatalf("after done: %v", err)
	}
}
