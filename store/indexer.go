package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// IndexerName is the durable consumer the indexer reads the mailbox and
// outbox streams with. Every server of the store shares it: JetStream hands
// each record to one of them.
const IndexerName = "ea_store_index"

// entry is one index entry, the body of a message on an index subject. It
// points at a record (stream and sequence) and repeats what queries filter
// on, so a query reads records only for the entries it returns.
type entry struct {
	Stream  string `json:"st"`
	Seq     uint64 `json:"sq"`
	Subject string `json:"sj"`
	ID      string `json:"id"`
	Type    string `json:"ty"`
	Process string `json:"pr,omitempty"`
	Owner   string `json:"ow,omitempty"`
	Time    int64  `json:"ts"` // when the record's stream stored it, Unix ns
}

// recordID is the id of a record: its Nats-Msg-Id, or the one the runtime
// derives from its sequence when it has none.
func recordID(h map[string][]string, seq uint64) string {
	if vs := h[records.HeaderID]; len(vs) > 0 && vs[0] != "" {
		return vs[0]
	}
	return "s" + strconv.FormatUint(seq, 10)
}

// ensureIndex creates or updates the index streams, keeping index entries
// as long as the log keeps records: the mailbox stream's age limit and, when
// both log streams have a size limit, their sum as each index stream's
// (entries are smaller than most records, so they outlive them; a query
// skips an entry whose record is gone).
func ensureIndex(ctx context.Context, conn *bus.Conn, n names) error {
	mbox, err := conn.MailboxStream(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out, err := conn.OutboxStream(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	mc, oc := mbox.CachedInfo().Config, out.CachedInfo().Config
	maxBytes := int64(-1)
	if mc.MaxBytes > 0 && oc.MaxBytes > 0 {
		maxBytes = mc.MaxBytes + oc.MaxBytes
	}
	type index struct{ stream, filter, what string }
	indexes := []index{
		{n.IndexStream(indexType), n.indexFilter(indexType), "type"},
		{n.IndexStream(indexID), n.indexFilter(indexID), "record id"},
	}
	for shard := range processShards {
		indexes = append(indexes, index{n.processStream(shard), n.processFilter(shard), fmt.Sprintf("process (shard %d of %d)", shard, processShards)})
	}
	for shard := range ownerShards {
		indexes = append(indexes, index{n.ownerStream(shard), n.ownerFilter(shard), fmt.Sprintf("owner (shard %d of %d)", shard, ownerShards)})
	}
	for _, ix := range indexes {
		_, err = conn.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        ix.stream,
			Description: "record store index by " + ix.what + ": entries pointing at mailbox and outbox records",
			Subjects:    []string{ix.filter},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    mc.Replicas,
			Duplicates:  2 * time.Minute,
			MaxAge:      longest(mc.MaxAge, oc.MaxAge),
			MaxBytes:    maxBytes,
			AllowDirect: true,
		})
		if err != nil {
			return fmt.Errorf("provision stream %s: %w", ix.stream, err)
		}
	}
	return nil
}

// longest is the longer of two age limits, 0 (none) being the longest.
func longest(a, b time.Duration) time.Duration {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

// indexer follows the mailbox and outbox streams (headers only) with the
// durable consumer [IndexerName] and writes index entries: one on the
// record's process subject (when it has a process), one on its type
// subject, one on its id bucket. Each entry has the message id
// <stream>.<seq>.<p|t|i>, so a record redelivered after a crash is
// indexed once (within the index stream's duplicate window).
type indexer struct {
	js  jetstream.JetStream
	n   names
	log *slog.Logger
}

func (ix *indexer) run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, stream := range []string{ix.n.MailboxStream(), ix.n.OutboxStream()} {
		wg.Go(func() { errs <- ix.follow(ctx, stream) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (ix *indexer) follow(ctx context.Context, stream string) error {
	cons, err := ix.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       IndexerName,
		Description:   "record store indexer",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       time.Minute,
		MaxAckPending: 10_000,
		HeadersOnly:   true,
	})
	if err != nil {
		return fmt.Errorf("indexer consumer on %s: %w", stream, err)
	}
	for ctx.Err() == nil {
		if err := ix.step(ctx, cons); err != nil && ctx.Err() == nil {
			ix.log.Warn("record store indexer", "stream", stream, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// step indexes one batch: publish every entry, wait for the acks, then ack
// the records.
func (ix *indexer) step(ctx context.Context, cons jetstream.Consumer) error {
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	batch, err := cons.Fetch(500, jetstream.FetchContext(fctx))
	if err != nil {
		return err
	}
	var msgs []jetstream.Msg
	var futures []jetstream.PubAckFuture
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		msgs = append(msgs, msg)
		for _, e := range ix.entries(meta, msg) {
			f, err := ix.js.PublishMsgAsync(e, jetstream.WithStallWait(30*time.Second))
			if err != nil {
				return err
			}
			futures = append(futures, f)
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
		return err
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("write index entry: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, m := range msgs {
		_ = m.Ack()
	}
	return nil
}

func (ix *indexer) entries(meta *jetstream.MsgMetadata, msg jetstream.Msg) []*jetstreamMsg {
	h := msg.Headers()
	first := func(k string) string {
		if vs := h[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	// Values past what a valid record carries are kept as their digest, so
	// that neither an index subject nor an entry grows with a header (see
	// token): such a record is dead-lettered by the runtime, and no query
	// can ask for those values.
	e := entry{
		Stream:  meta.Stream,
		Seq:     meta.Sequence.Stream,
		Subject: msg.Subject(),
		ID:      bounded(recordID(h, meta.Sequence.Stream)),
		Type:    bounded(first(records.HeaderType)),
		Process: bounded(first(records.HeaderProcess)),
		Owner:   bounded(first(records.HeaderOwner)),
		Time:    meta.Timestamp.UnixNano(),
	}
	if e.Type == "" {
		e.Type = records.DefaultType
	}
	body, _ := json.Marshal(e)
	base := e.Stream + "." + strconv.FormatUint(e.Seq, 10) + "."
	out := []*jetstreamMsg{
		newIndexMsg(ix.n.idIndex(e.ID), base+"i", body),
		newIndexMsg(ix.n.typeIndex(e.Type), base+"t", body),
	}
	if e.Process != "" {
		_, subject := ix.n.processIndex(e.Process)
		out = append(out, newIndexMsg(subject, base+"p", body))
	}
	if e.Owner != "" {
		_, subject := ix.n.ownerIndex(e.Owner)
		out = append(out, newIndexMsg(subject, base+"o", body))
	}
	return out
}
