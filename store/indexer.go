package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// IndexerName is the durable consumer the indexer reads the mailbox and
// outbox streams with. Every server of the store shares it: JetStream hands
// each record to one of them.
const IndexerName = "ea_store_index"

// entry is one index entry (an index message holds one or several, see
// entry.go). It points at a record (stream and sequence) and repeats what queries filter
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
// both log streams have a size limit, their sum (over every stream group) as
// each index stream's (entries are smaller than most records, so they
// outlive them; a query skips an entry whose record is gone).
//
// The id index stream allows fast batch publishing (nats-server 2.14 and
// later); batched reports whether the server took that setting.
func ensureIndex(ctx context.Context, conn *bus.Conn, n names) (batched bool, err error) {
	// With stream groups every group's streams are provisioned alike:
	// group 0's limits are every group's.
	mbox, err := conn.MailboxStreamOf(ctx, 0)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out, err := conn.OutboxStreamOf(ctx, 0)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	mc, oc := mbox.CachedInfo().Config, out.CachedInfo().Config
	maxBytes := int64(-1)
	if mc.MaxBytes > 0 && oc.MaxBytes > 0 {
		maxBytes = int64(n.Groups()) * (mc.MaxBytes + oc.MaxBytes) // every group's log
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
		st, err := conn.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{
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
			// The id index takes a message per record: the indexer
			// writes a batch's as one fast batch (one acknowledgement).
			AllowBatchPublish: ix.stream == n.IndexStream(indexID),
		})
		if err != nil {
			return false, fmt.Errorf("provision stream %s: %w", ix.stream, err)
		}
		if ix.stream == n.IndexStream(indexID) {
			batched = st.CachedInfo().Config.AllowBatchPublish
		}
	}
	return batched, nil
}

// longest is the longer of two age limits, 0 (none) being the longest.
func longest(a, b time.Duration) time.Duration {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

// indexer follows the mailbox and outbox streams (headers only) with the
// durable consumer [IndexerName] and writes index entries for every
// record: on its id subject, its type subject and, when it has them, its
// process and owner subjects. The entries of one batch of records that go
// to the same subject are written as one index message (see entry.go), and
// the batch's messages are published asynchronously with one wait for
// them all; then the records are acknowledged. A record redelivered (a
// server stopped between writing its entries and acknowledging it) is
// indexed twice: queries return it once per page.
type indexer struct {
	js  jetstream.JetStream
	n   names
	log *slog.Logger
	// batched: the id index stream takes fast batches (see fastBatch).
	batched bool
}

// indexBatch is how many records the indexer takes at most in one batch:
// as many as have arrived, so that at low rates a record is indexed as soon
// as it is stored and at high rates its entries share messages.
const indexBatch = 500

func (ix *indexer) run(ctx context.Context) error {
	var wg sync.WaitGroup
	streams := ix.n.logStreams()
	errs := make(chan error, len(streams))
	for _, stream := range streams {
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

// follow indexes stream until ctx ends, consuming it again after a failure
// (a second apart).
func (ix *indexer) follow(ctx context.Context, stream string) error {
	for ctx.Err() == nil {
		if err := ix.consume(ctx, stream); err != nil && ctx.Err() == nil {
			ix.log.Warn("record store indexer", "stream", stream, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// consume keeps a pull window of records open on stream (JetStream sends
// them as they are stored) and indexes them in batches of what has
// arrived, until ctx ends or the consumer fails for good.
func (ix *indexer) consume(ctx context.Context, stream string) error {
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
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan jetstream.Msg, 2*indexBatch)
	var fatal error
	var once sync.Once
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-cctx.Done():
		}
	}, jetstream.PullMaxMessages(indexBatch),
		// A pull that ends unseen (its heartbeats stop) is replaced within
		// 2 s instead of the default 30.
		jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				once.Do(func() { fatal = err; cancel() })
			}
		}))
	if err != nil {
		return fmt.Errorf("indexer consumer on %s: %w", stream, err)
	}
	defer cc.Stop()
	var fast *fastBatch
	if ix.batched {
		if fast, err = newFastBatch(ix.js.Conn()); err != nil {
			return fmt.Errorf("indexer on %s: %w", stream, err)
		}
		defer fast.close()
	}
	batch := make([]jetstream.Msg, 0, indexBatch)
	for {
		batch = batch[:0]
		select {
		case <-cctx.Done():
			if ctx.Err() == nil {
				return fmt.Errorf("indexer consumer on %s: %w", stream, fatal)
			}
			return nil
		case m := <-msgs:
			batch = append(batch, m)
		}
	more:
		for len(batch) < indexBatch {
			select {
			case m := <-msgs:
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := ix.index(ctx, batch, fast); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Let JetStream hand the batch out again, a second later.
			for _, m := range batch {
				_ = m.NakWithDelay(time.Second)
			}
			ix.log.Warn("record store indexer", "stream", stream, "err", err)
		}
	}
}

// indexMsg is one index message being built: the entries of a batch for
// one subject.
type indexMsg struct {
	subject string
	body    []byte
	n       int
	id      bool // in the id index
}

// index writes the entries of a batch of records, waits for JetStream to
// store them, then acknowledges the records. With fast set, the id index's
// messages go as one fast batch.
func (ix *indexer) index(ctx context.Context, batch []jetstream.Msg, fast *fastBatch) error {
	open := make(map[string]*indexMsg)
	var out []*indexMsg
	// A message ends past maxEntryMsg, or half the server's largest
	// payload when that is smaller (an entry is at most a few KiB).
	maxBody := min(maxEntryMsg, int(ix.js.Conn().MaxPayload()/2))
	idIndex := strings.TrimSuffix(ix.n.indexFilter(indexID), ">")
	add := func(subject string, e entry) {
		m := open[subject]
		if m == nil || len(m.body) >= maxBody || m.n >= maxEntries {
			m = &indexMsg{subject: subject, body: []byte{entryFormat2}, id: strings.HasPrefix(subject, idIndex)}
			open[subject] = m
			out = append(out, m)
		}
		m.body = appendEntry(m.body, e)
		m.n++
	}
	for _, msg := range batch {
		meta, err := msg.Metadata()
		if err != nil { // not a JetStream message: nothing to index
			ix.log.Warn("record store indexer: message without metadata", "subject", msg.Subject(), "err", err)
			_ = msg.Term()
			continue
		}
		e := ix.entry(meta, msg)
		add(ix.n.idIndex(e.ID), e)
		add(ix.n.typeIndex(e.Type), e)
		if e.Process != "" {
			_, subject := ix.n.processIndex(e.Process)
			add(subject, e)
		}
		if e.Owner != "" {
			_, subject := ix.n.ownerIndex(e.Owner)
			add(subject, e)
		}
	}
	futures := make([]jetstream.PubAckFuture, 0, len(out))
	var ids []*nats.Msg
	for _, m := range out {
		msg := &nats.Msg{Subject: m.subject, Data: m.body}
		if fast != nil && m.id {
			ids = append(ids, msg)
			continue
		}
		f, err := ix.js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			return fmt.Errorf("write index entry: %w", err)
		}
		futures = append(futures, f)
	}
	if err := fast.publish(ctx, ids); err != nil {
		return fmt.Errorf("write id index entries: %w", err)
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
	for _, m := range batch {
		_ = m.Ack()
	}
	return nil
}

// entry is the index entry of a record.
func (ix *indexer) entry(meta *jetstream.MsgMetadata, msg jetstream.Msg) entry {
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
	return e
}
