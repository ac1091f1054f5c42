package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// Client queries the record log and lists and watches effectors, reading
// JetStream directly. It is safe for concurrent use. Queries by process,
// type and record id read the index a [Server] writes: run at least one
// (ea-node does) or they find nothing.
type Client struct {
	conn   *bus.Conn
	n      names
	direct direct
	// batched: the server takes fast batches on the id index stream.
	batched bool
}

// NewClient returns a client on conn, which must be provisioned. It creates
// the index stream when it is missing.
func NewClient(ctx context.Context, conn *bus.Conn) (*Client, error) {
	if conn == nil {
		return nil, invalidf("NewClient: conn is nil")
	}
	n := newNames(conn.Names())
	batched, err := ensureIndex(ctx, conn, n)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, n: n, direct: direct{nc: conn.NATS()}, batched: batched}, nil
}

func unavailable(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

// plan chooses the sources of q: the process index, the effector's own
// subjects, the type index, or the log itself, in that order of preference.
func (c *Client) plan(q Query) []source {
	inBox := func(stream string) bool {
		return q.Box == BoxBoth || (q.Box == BoxMailbox) == c.n.isMailboxStream(stream)
	}
	var effSubjects map[string]bool
	if !q.Effector.IsZero() {
		effSubjects = map[string]bool{c.n.StoredMailbox(q.Effector): true, c.n.Outbox(q.Effector): true}
	}
	inTime := func(t time.Time) bool {
		return (q.Since.IsZero() || !t.Before(q.Since)) && (q.Until.IsZero() || !t.After(q.Until))
	}
	typ := q.Type
	keepEntry := func(it item) bool {
		e := it.e
		return inBox(e.Stream) && c.n.isLogStream(e.Stream) &&
			(effSubjects == nil || effSubjects[e.Subject]) &&
			(q.Process == "" || e.Process == q.Process) && (q.Owner == "" || e.Owner == q.Owner) &&
			(typ == "" || e.Type == typ) && inTime(it.time)
	}
	keepRecord := func(it item) bool {
		h := it.msg.header
		first := func(k string) string {
			if vs := h[k]; len(vs) > 0 {
				return vs[0]
			}
			return ""
		}
		if typ != "" {
			t := first(records.HeaderType)
			if t == "" {
				t = records.DefaultType
			}
			if t != typ {
				return false
			}
		}
		return (q.Process == "" || first(records.HeaderProcess) == q.Process) &&
			(q.Owner == "" || first(records.HeaderOwner) == q.Owner) && inTime(it.time)
	}
	switch {
	case q.Process != "":
		stream, subject := c.n.processIndex(q.Process)
		return []source{{stream: stream, filter: subject, index: true, keep: keepEntry}}
	case !q.Effector.IsZero():
		var s []source
		if mbox := c.n.MailboxStreamFor(q.Effector); inBox(mbox) {
			s = append(s, source{stream: mbox, filter: c.n.StoredMailbox(q.Effector), keep: keepRecord})
		}
		if out := c.n.OutboxStreamFor(q.Effector); inBox(out) {
			s = append(s, source{stream: out, filter: c.n.Outbox(q.Effector), keep: keepRecord})
		}
		return s
	case q.Owner != "":
		stream, subject := c.n.ownerIndex(q.Owner)
		return []source{{stream: stream, filter: subject, index: true, keep: keepEntry}}
	case q.Type != "":
		return []source{{stream: c.n.IndexStream(indexType), filter: c.n.typeIndex(q.Type), index: true, keep: keepEntry}}
	}
	// The whole log: every mailbox and outbox stream (one of each, or one
	// per stream group), merged in time order.
	var s []source
	for _, stream := range c.n.logStreams() {
		if !inBox(stream) {
			continue
		}
		filter := c.n.outboxes()
		if c.n.isMailboxStream(stream) {
			filter = c.n.mailboxes()
		}
		s = append(s, source{stream: stream, filter: filter, keep: keepRecord})
	}
	return s
}

// Query returns one page of the records q selects. See [Query] for what is
// indexed. Errors: [ErrInvalid] (with [ErrBadCursor] or [ErrPageTooLarge]
// when they apply) for a bad query, [ErrUnavailable] when a stream is
// missing.
func (c *Client) Query(ctx context.Context, q Query) (Page, error) {
	sources := c.plan(q)
	pos, format, err := q.validateV(len(sources))
	if err != nil {
		return Page{}, err
	}
	sources = c.plan(q) // q.Limit may have been defaulted; the plan does not use it
	newest := q.Order == NewestFirst
	if pos == nil {
		pos = make([]uint64, len(sources))
	}
	indexed := false
	for i, s := range sources {
		if s.index {
			indexed = true
			if format == 1 {
				pos[i] = upgradePos(pos[i], newest)
			}
		}
	}
	results := make([]scanResult, len(sources))
	for i, s := range sources {
		if newest && pos[i] == 1 { // exhausted earlier
			results[i] = scanResult{edge: 1, done: true}
			continue
		}
		switch {
		case s.index && newest:
			results[i], err = c.backwardIndex(ctx, i, s, pos[i], q.Limit, maxScan)
		case s.index:
			results[i], err = c.forwardIndex(ctx, i, s, pos[i], q.Limit, maxScan)
		case newest:
			results[i], err = c.backward(ctx, i, s, pos[i], q.Limit, maxScan, q.Since)
		default:
			results[i], err = c.forward(ctx, i, s, pos[i], q.Limit, maxScan, q.Since, q.Until)
		}
		if err != nil {
			return Page{}, c.wrap(s.stream, err)
		}
	}
	items, taken := merge(results, q.Limit, newest)
	// New positions: after (before) the last item taken from each source,
	// or as far as the scan got when everything it matched was taken.
	next := make([]uint64, len(sources))
	more := false
	allDone := true
	for i, r := range results {
		switch {
		case taken[i] < len(r.items):
			more = true
			allDone = false
			if taken[i] > 0 {
				next[i] = r.items[taken[i]-1].seq
			} else if newest {
				next[i] = r.items[0].seq + 1
			} else {
				next[i] = r.items[0].seq - 1
			}
		default:
			next[i] = r.edge
			if !r.done {
				more = true
				allDone = false
			}
		}
		if newest && r.done && taken[i] == len(r.items) {
			next[i] = 1
		}
		if !newest && next[i] < pos[i] {
			next[i] = pos[i]
		}
	}
	recs, err := c.load(ctx, sources, items)
	if err != nil {
		return Page{}, err
	}
	page := Page{Records: recs, More: more}
	if !newest || !allDone {
		format := 1
		if indexed {
			format = 2
		}
		page.Cursor = encodeCursorV(format, q.fingerprint(), next)
	}
	return page, nil
}

func (c *Client) wrap(stream string, err error) error {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalid) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("read %s: %w", stream, err)
}

// merge takes up to limit items across results in time order (each
// source's items are already in scan order: a k-way merge of their heads),
// and returns them with how many it took from each source.
func merge(results []scanResult, limit int, newest bool) ([]item, []int) {
	var out []item
	next := make([]int, len(results))
	for len(out) < limit {
		best := -1
		for i, r := range results {
			if next[i] == len(r.items) {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			a, b := r.items[next[i]].time, results[best].items[next[best]].time
			if (!newest && a.Before(b)) || (newest && a.After(b)) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out = append(out, results[best].items[next[best]])
		next[best]++
	}
	return out, next
}

// load turns items into records, reading the records index entries point
// at (one pipelined round trip). Records gone from the log are left out.
func (c *Client) load(ctx context.Context, sources []source, items []item) ([]Record, error) {
	var refs []getRef
	for _, it := range items {
		if sources[it.src].index {
			refs = append(refs, getRef{stream: it.e.Stream, seq: it.e.Seq})
		}
	}
	got, err := c.direct.get(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(items))
	// A record indexed twice (redelivered to the indexer after the index
	// stream's duplicate window) is returned once per page.
	type at struct {
		stream string
		seq    uint64
	}
	seen := make(map[at]bool, len(items))
	j := 0
	for _, it := range items {
		m := it.msg
		if sources[it.src].index {
			m = got[j]
			j++
			if m.seq == 0 || seen[at{m.stream, m.seq}] {
				continue
			}
			seen[at{m.stream, m.seq}] = true
		}
		out = append(out, c.record(m))
	}
	return out, nil
}

// record converts a stored record message.
func (c *Client) record(m stored) Record {
	r := Record{Stream: m.stream, Stored: m.time}
	subject := m.subject
	if c.n.isMailboxStream(m.stream) {
		r.Box = BoxMailbox
		if ref, _, ok := c.n.StoredMailboxOf(m.subject); ok {
			r.Effector = ref
			subject = c.n.Mailbox(ref)
		}
	} else {
		r.Box = BoxOutbox
		r.Effector, _ = c.n.RefOf(m.subject)
	}
	rec, err := records.FromMsg(subject, m.header, m.data)
	if err != nil {
		r.Invalid = err.Error()
		rec = records.Record{Subject: subject, Payload: m.data}
	}
	if rec.ID == "" {
		rec.ID = recordID(m.header, m.seq)
	}
	rec.Stream, rec.Seq = m.stream, m.seq
	r.Record = rec
	return r
}

// Get returns the record with id (its Nats-Msg-Id, or "s<seq>" as the
// runtime derives for a record published without one). A record both sent
// to a mailbox and kept in an outbox under the same id is returned from the
// mailbox. It reads the id index: a record is found once the indexer has
// seen it (milliseconds after it is stored). Errors: [ErrInvalid] for an id
// outside the contract, [ErrNotFound].
func (c *Client) Get(ctx context.Context, id string) (Record, error) {
	if err := (records.Record{ID: id}).Validate(); err != nil || id == "" {
		return Record{}, invalidf("record id %q: must be 1-256 printable ASCII characters without spaces", id)
	}
	stream, subject := c.n.IndexStream(indexID), c.n.idIndex(id)
	var refs []getRef
	for from := uint64(1); ; {
		got, pending, err := c.direct.batch(ctx, stream, subject, from, nil, 1000)
		if err != nil {
			return Record{}, c.wrap(stream, err)
		}
		for _, m := range got {
			es, _ := decodeEntries(m.data)
			for _, e := range es {
				if e.ID == id {
					refs = append(refs, getRef{stream: e.Stream, seq: e.Seq})
				}
			}
			from = m.seq + 1
		}
		if len(got) == 0 || pending == 0 {
			break
		}
	}
	slices.SortStableFunc(refs, func(a, b getRef) int {
		return boolInt(!c.n.isMailboxStream(a.stream)) - boolInt(!c.n.isMailboxStream(b.stream))
	})
	got, err := c.direct.get(ctx, refs)
	if err != nil {
		return Record{}, err
	}
	for _, m := range got {
		if m.seq != 0 {
			return c.record(m), nil
		}
	}
	return Record{}, fmt.Errorf("record %q: %w", id, ErrNotFound)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// countBudget bounds how many entries a [Client.Count] of a combined query
// examines.
const countBudget = 100_000

// indexCountBudget bounds how many entries a [Client.Count] of one indexed
// selector (process, owner or type) reads.
const indexCountBudget = 10_000_000

// Count returns how many records q selects (its Order, Limit and Cursor are
// ignored). A query with only the Effector selector (with Box), or nothing,
// is counted from JetStream's per-subject state without reading records;
// one with only Process, Owner or Type reads the index entries of that
// value (not the records: ~70 bytes each), at most 10,000,000; a query
// that also filters examines at most 100,000 entries. Past a bound it
// fails with [ErrInvalid]. A record indexed twice (redelivered to the
// indexer) is counted twice.
func (c *Client) Count(ctx context.Context, q Query) (uint64, error) {
	q.Cursor, q.Order, q.Limit = "", OldestFirst, 0
	if _, err := q.validate(0); err != nil {
		return 0, err
	}
	sources := c.plan(q)
	selectors := 0
	for _, set := range []bool{q.Process != "", !q.Effector.IsZero(), q.Owner != "", q.Type != "", !q.Since.IsZero() || !q.Until.IsZero()} {
		if set {
			selectors++
		}
	}
	if selectors <= 1 && q.Since.IsZero() && q.Until.IsZero() && (q.Box == BoxBoth || !q.Effector.IsZero()) {
		var total uint64
		for _, s := range sources {
			var n uint64
			var err error
			if s.index {
				n, err = c.countIndex(ctx, s)
			} else {
				n, err = c.direct.count(ctx, s.stream, s.filter)
			}
			if err != nil {
				return 0, c.wrap(s.stream, err)
			}
			total += n
		}
		return total, nil
	}
	var total uint64
	for i, s := range sources {
		var r scanResult
		var err error
		if s.index {
			r, err = c.forwardIndex(ctx, i, s, 0, math.MaxInt, countBudget)
		} else {
			r, err = c.forward(ctx, i, s, 0, math.MaxInt, countBudget, q.Since, q.Until)
		}
		if err != nil {
			return 0, c.wrap(s.stream, err)
		}
		if !r.done {
			return 0, invalidf("count examines at most %d entries per stream: narrow the query (by process, effector or type)", countBudget)
		}
		total += uint64(len(r.items))
	}
	return total, nil
}

// countIndex counts the entries of an index source, reading at most
// indexCountBudget.
func (c *Client) countIndex(ctx context.Context, s source) (uint64, error) {
	var total uint64
	for from := uint64(1); ; {
		got, pending, err := c.direct.batchMax(ctx, s.stream, s.filter, from, nil, 1000, indexBatchBytes)
		if err != nil {
			return 0, err
		}
		for _, m := range got {
			total += uint64(countEntries(m.data))
			from = m.seq + 1
		}
		if len(got) == 0 || pending == 0 {
			return total, nil
		}
		if total > indexCountBudget {
			return 0, invalidf("count reads at most %d index entries: narrow the query (add an effector, a time or another selector)", indexCountBudget)
		}
	}
}

// IndexLag returns how many records the indexer has not indexed yet
// (pending and unacknowledged, every mailbox and outbox stream together).
func (c *Client) IndexLag(ctx context.Context) (uint64, error) {
	var lag uint64
	for _, stream := range c.n.logStreams() {
		cons, err := c.conn.JetStream().Consumer(ctx, stream, IndexerName)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			st, serr := c.conn.JetStream().Stream(ctx, stream)
			if serr != nil {
				return 0, unavailable(stream, serr)
			}
			lag += st.CachedInfo().State.Msgs
			continue
		}
		if err != nil {
			return 0, unavailable(stream, err)
		}
		info := cons.CachedInfo()
		lag += info.NumPending + uint64(info.NumAckPending)
	}
	return lag, nil
}
