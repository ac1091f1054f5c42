package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Migrate moves a deployment of the previous layout (stream EA_RECORDS
// holding mailboxes and outboxes, a consumer per effector) to partitioned
// mailboxes, keeping the record log and the state documents:
//
//   - EA_RECORDS stops taking records: its subjects become
//     <prefix>.legacy.> (the records it holds stay readable) and the
//     per-effector consumers of the previous release are deleted;
//   - the mailbox stream starts after EA_RECORDS' last sequence, so every
//     state document's seq (a sequence of EA_RECORDS) stays below the
//     sequences of new records and nothing is skipped or applied twice.
//
// Run it with no node of the previous release running, once they have
// processed every mailbox: records left unprocessed in EA_RECORDS are not
// moved. Then [Conn.Provision] completes the new layout. Migrating a
// deployment that has no EA_RECORDS stream is a no-op.
func (c *Conn) Migrate(ctx context.Context) error {
	name := c.names.LegacyRecordsStream()
	s, err := c.JetStream().Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate: read stream %s: %w", name, err)
	}
	cfg := s.CachedInfo().Config
	last := s.CachedInfo().State.LastSeq
	legacy := c.names.LegacySubjects()
	if !slices.Equal(cfg.Subjects, []string{legacy}) {
		for name := range s.ConsumerNames(ctx).Name() {
			if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("migrate: delete consumer %s of the previous layout: %w", name, err)
			}
		}
		cfg.Subjects = []string{legacy}
		if _, err := c.JetStream().UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("migrate: retire stream %s: %w", name, err)
		}
	}
	mbox, err := c.JetStream().Stream(ctx, c.names.MailboxStream())
	switch {
	case err == nil:
		if mbox.CachedInfo().State.FirstSeq <= last && mbox.CachedInfo().State.Msgs > 0 {
			return fmt.Errorf("migrate: %w: stream %s already holds records from sequence %d, at or below %s's last %d: state documents would skip them", ErrInvalidConfig, c.names.MailboxStream(), mbox.CachedInfo().State.FirstSeq, name, last)
		}
		if mbox.CachedInfo().State.LastSeq >= last {
			return nil
		}
		if err := c.JetStream().DeleteStream(ctx, c.names.MailboxStream()); err != nil {
			return fmt.Errorf("migrate: recreate stream %s: %w", c.names.MailboxStream(), err)
		}
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("migrate: read stream %s: %w", c.names.MailboxStream(), err)
	}
	sc := c.mailboxConfig()
	c.retain(&sc, nil)
	sc.FirstSeq = last + 1
	if _, err := c.JetStream().CreateStream(ctx, sc); err != nil {
		return fmt.Errorf("migrate: create stream %s after sequence %d: %w", sc.Name, last, c.explain(err))
	}
	c.log.Info("migrated to partitioned mailboxes", "legacy", name, "legacy_subjects", legacy, "mailbox_first_seq", last+1)
	return nil
}
