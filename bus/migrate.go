package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
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

// metaMigration is the metadata key of a mailbox stream retired by
// [Conn.MigrateGroups]: "copying" while its records are copied, "done"
// after.
const metaMigration = "effectors.groups-migration"

// HeaderMigratedFrom is set on every record [Conn.MigrateGroups] copies:
// <stream>:<sequence> of the original.
const HeaderMigratedFrom = "EA-Migrated-From"

// MigrateGroups moves a deployment provisioned with one mailbox stream
// (EA_MBOX) and one state bucket (ea_state) to this connection's stream
// groups ([Config.Groups] > 1; the partition count stays), applying no record
// twice and losing none:
//
//  1. EA_MBOX stops taking records: its subjects become
//     <prefix>.retired.mbox.> (what it holds stays readable) and its
//     consumers are deleted. From here until the nodes run with groups,
//     mailbox publishes fail (no stream listens), which JetStream
//     publishers see and retry.
//  2. Every group's mailbox stream starts after EA_MBOX's last sequence,
//     so every state document's seq (a sequence of EA_MBOX) stays below the
//     sequences of the records copied and published from now on.
//  3. Every state document is copied to its group's bucket (the latest
//     revision; the history stays in ea_state).
//  4. Every record of EA_MBOX that its effector's state document does not
//     count as applied (sequence above seq and not in ahead) is copied, in
//     order, to its group's stream under the same subject, with its headers
//     (JetStream directives but Nats-Msg-Id left out; a record without an id
//     gets the one the runtime gave it, s<sequence>) and [HeaderMigratedFrom].
//     Records stored under no partition or under another partition than
//     their effector's are not copied: no node applies them.
//
// Stop every node first (a node still running the one-stream layout would
// apply records that are copied too). Interrupted, it resumes where it
// stopped: run it again. Once done, running it again is a no-op, as is
// running it on a deployment that has no EA_MBOX. Then [Conn.Provision]
// completes the layout (and, on an embedded server, adds the account
// mapping). Outputs of a record that a crashed node published before it
// could write the state document are published again under new ids, since
// output ids are derived from the record's stream sequence.
func (c *Conn) MigrateGroups(ctx context.Context) error {
	n := c.names
	if n.Groups() == 1 {
		return nil
	}
	js := c.JetStream()
	old, err := js.Stream(ctx, n.MailboxStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate to stream groups: read stream %s: %w", n.MailboxStream(), err)
	}
	sc := old.CachedInfo().Config
	switch state := sc.Metadata[metaMigration]; {
	case state == "done":
		return nil
	case state == "copying":
		g, p, _ := groupsOfStream(sc)
		if c.unsetPartitions && p > 0 {
			c.cfg.Partitions = p
			c.setLayout()
			n = c.names
		}
		if g != n.Groups() || p != n.Partitions() {
			return fmt.Errorf("migrate to stream groups: %w: a migration to %s stream groups over %s partitions was interrupted; finish it with those counts", ErrInvalidConfig, sc.Metadata[metaGroups], sc.Metadata[metaPartitions])
		}
	default:
		p, ok := n.PartitionsOfTransform(transformDest(sc))
		if !ok {
			return c.matchPartitions(sc)
		}
		if c.unsetPartitions {
			c.cfg.Partitions = p
			c.setLayout()
			if n = c.names; n.Groups() != c.cfg.Groups {
				return fmt.Errorf("migrate to stream groups: %w: %d stream groups: more than the %d partitions of stream %s", ErrInvalidConfig, c.cfg.Groups, p, sc.Name)
			}
		}
		if p != n.Partitions() {
			return fmt.Errorf("migrate to stream groups: %w: stream %s has %d partitions and this connection is configured for %d: the partition count stays (set partitions to %d)", ErrInvalidConfig, sc.Name, p, n.Partitions(), p)
		}
		if err := c.retireMailbox(ctx, old); err != nil {
			return err
		}
	}
	if old, err = js.Stream(ctx, n.MailboxStream()); err != nil {
		return fmt.Errorf("migrate to stream groups: read stream %s: %w", n.MailboxStream(), err)
	}
	last := old.CachedInfo().State.LastSeq
	groups, err := c.groupStreamsAfter(ctx, last)
	if err != nil {
		return err
	}
	one, _ := n.WithGroups(1)
	oldState, err := js.KeyValue(ctx, one.StateBucket())
	if err != nil {
		return fmt.Errorf("migrate to stream groups: bucket %s: %w", one.StateBucket(), err)
	}
	states, err := c.copyStates(ctx, oldState)
	if err != nil {
		return err
	}
	copied, err := c.copyUnapplied(ctx, old, groups, oldState, last)
	if err != nil {
		return err
	}
	sc = old.CachedInfo().Config
	sc.Metadata[metaMigration] = "done"
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("migrate to stream groups: mark %s migrated: %w", sc.Name, err)
	}
	c.log.Info("migrated to stream groups", "groups", n.Groups(), "retired", sc.Name, "retired_subjects", n.RetiredMailboxes(),
		"first_seq", last+1, "states_copied", states, "records_copied", copied)
	return nil
}

// retireMailbox makes the one mailbox stream stop taking records and
// deletes its consumers.
func (c *Conn) retireMailbox(ctx context.Context, s jetstream.Stream) error {
	sc := s.CachedInfo().Config
	for name := range s.ConsumerNames(ctx).Name() {
		if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("migrate to stream groups: delete consumer %s of %s: %w", name, sc.Name, err)
		}
	}
	sc.Subjects = []string{c.names.RetiredMailboxes()}
	sc.SubjectTransform = nil
	if sc.Metadata == nil {
		sc.Metadata = map[string]string{}
	}
	sc.Metadata[metaMigration] = "copying"
	sc.Metadata[metaGroups] = strconv.Itoa(c.names.Groups())
	sc.Metadata[metaPartitions] = strconv.Itoa(c.names.Partitions())
	if _, err := c.JetStream().UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("migrate to stream groups: retire stream %s: %w", sc.Name, err)
	}
	return nil
}

// groupStreamsAfter creates the groups' mailbox streams starting after
// sequence last (or checks those an interrupted migration created) and the
// groups' state buckets, and returns the streams.
func (c *Conn) groupStreamsAfter(ctx context.Context, last uint64) ([]jetstream.Stream, error) {
	js := c.JetStream()
	var out []jetstream.Stream
	for _, sc := range c.groupMailboxConfigs() {
		s, err := js.Stream(ctx, sc.Name)
		switch {
		case err == nil:
			if st := s.CachedInfo().State; st.FirstSeq <= last && (st.Msgs > 0 || st.LastSeq < last) {
				return nil, fmt.Errorf("migrate to stream groups: %w: stream %s exists and does not start after %d: state documents would skip its records", ErrInvalidConfig, sc.Name, last)
			}
		case errors.Is(err, jetstream.ErrStreamNotFound):
			c.retain(&sc, nil)
			sc.FirstSeq = last + 1
			if s, err = js.CreateStream(ctx, sc); err != nil {
				return nil, fmt.Errorf("migrate to stream groups: create stream %s after sequence %d: %w", sc.Name, last, c.explain(err))
			}
		default:
			return nil, fmt.Errorf("migrate to stream groups: read stream %s: %w", sc.Name, err)
		}
		out = append(out, s)
	}
	for g, name := range c.names.StateBuckets() {
		kc := jetstream.KeyValueConfig{Bucket: name, Description: fmt.Sprintf("effector state documents, stream group %d of %d", g, c.names.Groups()),
			History: uint8(c.cfg.StateHistory), Storage: jetstream.FileStorage, Replicas: c.cfg.Replicas}
		if _, err := js.CreateOrUpdateKeyValue(ctx, kc); err != nil {
			return nil, fmt.Errorf("migrate to stream groups: bucket %s: %w", name, c.explain(err))
		}
	}
	return out, nil
}

// copyStates copies the latest revision of every state document of the one
// bucket to its group's bucket, leaving a document already there alone (an
// interrupted migration copied it). It returns how many it copied.
func (c *Conn) copyStates(ctx context.Context, from jetstream.KeyValue) (int, error) {
	buckets, err := c.StateBuckets(ctx)
	if err != nil {
		return 0, err
	}
	keys, err := from.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate to stream groups: list the keys of %s: %w", from.Bucket(), err)
	}
	copied := 0
	for key := range keys.Keys() {
		g, ok := c.names.GroupOfKey(key)
		if !ok {
			c.log.Warn("migrate to stream groups: a key that names no effector is not copied", "bucket", from.Bucket(), "key", key)
			continue
		}
		e, err := from.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return copied, fmt.Errorf("migrate to stream groups: read %s of %s: %w", key, from.Bucket(), err)
		}
		_, err = buckets[g].Create(ctx, key, e.Value())
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
		case err != nil:
			return copied, fmt.Errorf("migrate to stream groups: copy %s to %s: %w", key, buckets[g].Bucket(), err)
		default:
			copied++
		}
	}
	return copied, nil
}

// readRetry bounds how long copyUnapplied tries to read the retired stream
// again without reading a record.
const readRetry = 30 * time.Second

// applied is what a state document says of the records applied: every
// sequence up to seq, and those in ahead.
type applied struct {
	Seq   uint64   `msgpack:"seq"`
	Ahead []uint64 `msgpack:"ahead"`
}

func (a applied) has(seq uint64) bool { return seq <= a.Seq || slices.Contains(a.Ahead, seq) }

// copyUnapplied copies, in order, the records of old up to last that their
// effectors' state documents (in states, the one bucket) do not count as
// applied, each to its group's stream, resuming after the last record an
// interrupted migration copied. It returns how many it copied.
func (c *Conn) copyUnapplied(ctx context.Context, old jetstream.Stream, groups []jetstream.Stream, states jetstream.KeyValue, last uint64) (int, error) {
	js := c.JetStream()
	from := old.CachedInfo().State.FirstSeq
	for _, g := range groups {
		info, err := g.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("migrate to stream groups: %w", err)
		}
		if info.State.Msgs == 0 {
			continue
		}
		m, err := g.GetMsg(ctx, info.State.LastSeq)
		if err != nil {
			return 0, fmt.Errorf("migrate to stream groups: last record of %s: %w", info.Config.Name, err)
		}
		_, seqText, _ := strings.Cut(m.Header.Get(HeaderMigratedFrom), ":")
		if seq, err := strconv.ParseUint(seqText, 10, 64); err == nil && seq+1 > from {
			from = seq + 1
		}
	}
	if last == 0 || from > last {
		return 0, nil
	}
	docs := map[records.Ref]applied{}
	copied := 0
	var cons jetstream.Consumer
	var failed time.Time // when reading last failed with no record read since
	for {
		var msg jetstream.Msg
		var err error
		if cons == nil {
			cons, err = old.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
		}
		if err == nil {
			msg, err = cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		}
		if err != nil {
			// A cluster may be moving a leader: read again from where it
			// stopped, for up to readRetry without progress.
			if failed.IsZero() {
				failed = time.Now()
			}
			if ctx.Err() != nil || time.Since(failed) > readRetry {
				return copied, fmt.Errorf("migrate to stream groups: read %s at sequence %d or after: %w", old.CachedInfo().Config.Name, from, errors.Join(err, ctx.Err()))
			}
			c.log.Debug("migrate to stream groups: reading again", "stream", old.CachedInfo().Config.Name, "from", from, "err", err)
			cons = nil
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		failed = time.Time{}
		meta, err := msg.Metadata()
		if err != nil {
			return copied, fmt.Errorf("migrate to stream groups: %w", err)
		}
		seq := meta.Sequence.Stream
		if seq > last {
			return copied, nil
		}
		if ok, err := c.copyRecord(ctx, js, msg, seq, groups, states, docs); err != nil {
			return copied, err
		} else if ok {
			copied++
		}
		if seq == last {
			return copied, nil
		}
		from = seq + 1
	}
}

// copyRecord copies the record msg (sequence seq of the one mailbox stream)
// to its group's stream unless its effector's document counts it as
// applied, or it is stored under no partition or another than its
// effector's. It reports whether it copied it.
func (c *Conn) copyRecord(ctx context.Context, js jetstream.JetStream, msg jetstream.Msg, seq uint64, groups []jetstream.Stream, states jetstream.KeyValue, docs map[records.Ref]applied) (bool, error) {
	n := c.names
	ref, p, ok := n.StoredMailboxOf(msg.Subject())
	if !ok || ref.Validate() != nil || n.Partition(ref) != p {
		return false, nil
	}
	doc, ok := docs[ref]
	if !ok {
		e, err := states.Get(ctx, n.StateKey(ref))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return false, fmt.Errorf("migrate to stream groups: state of %s: %w", ref, err)
		default:
			if err := msgpack.Unmarshal(e.Value(), &doc); err != nil {
				return false, fmt.Errorf("migrate to stream groups: state of %s does not decode: %w", ref, err)
			}
		}
		docs[ref] = doc
	}
	if doc.has(seq) {
		return false, nil
	}
	h := nats.Header{}
	for k, v := range msg.Headers() {
		if len(k) >= 5 && strings.EqualFold(k[:5], "Nats-") && k != records.HeaderID {
			continue
		}
		h[k] = v
	}
	if h.Get(records.HeaderID) == "" {
		h.Set(records.HeaderID, "s"+strconv.FormatUint(seq, 10))
	}
	h.Set(HeaderMigratedFrom, n.MailboxStream()+":"+strconv.FormatUint(seq, 10))
	g := groups[n.Group(p)]
	out := &nats.Msg{Subject: msg.Subject(), Header: h, Data: msg.Data()}
	ack, err := js.PublishMsg(ctx, out)
	if err == nil && ack.Duplicate {
		h.Set(records.HeaderID, "migrated-"+strconv.FormatUint(seq, 10))
		// The id was used again after the duplicate window by its
		// publisher; the group stream's window has them side by side.
		c.log.Warn("migrate to stream groups: a record id repeats; the copy gets another", "id", msg.Headers().Get(records.HeaderID), "new_id", h.Get(records.HeaderID), "seq", seq)
		ack, err = js.PublishMsg(ctx, out)
	}
	if err != nil {
		return false, fmt.Errorf("migrate to stream groups: copy record %d of %s to %s: %w", seq, n.MailboxStream(), g.CachedInfo().Config.Name, err)
	}
	if ack.Stream != g.CachedInfo().Config.Name {
		return false, fmt.Errorf("migrate to stream groups: record %d of %s was stored in %s, not its group's %s: another stream listens on %s", seq, n.MailboxStream(), ack.Stream, g.CachedInfo().Config.Name, msg.Subject())
	}
	return true, nil
}
