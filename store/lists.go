package store

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// Lists for consoles: dead letters and orchestrations a page at a time,
// newest first or oldest first, with filters, read straight from their
// streams with direct gets (no consumer, no index). A page costs reads in
// proportion to what it examines, at most [maxScan] stored messages; a
// page whose filters match rarely comes back short with More set and a
// cursor to go on from.

// MaxSearch bounds the text filters of [DeadQuery] and [OrchListQuery].
const MaxSearch = 256

// What one page of dead letters reads at most (their payloads and
// headers, matched or not): a page that reaches it ends short, with More.
// Newest first, windows of the stream are sized to about deadWindowBytes
// by the dead letters' mean size so far.
const (
	deadReadBytes   = 32 << 20
	deadWindowBytes = 4 << 20
)

// size is what a stored message weighs: its payload, headers and subject.
func (m stored) size() int {
	n := len(m.data) + len(m.subject)
	for k, vs := range m.header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return n
}

// MaxDeadPageBytes bounds the payloads and headers of one page of dead
// letters (a dead letter may carry a record of up to the server's message
// size): a page ends before the dead letter that would pass it, with More
// set, and holds at least one.
const MaxDeadPageBytes = 4 << 20

// DeadQuery selects dead letters (the dead-letter stream, EA_DEAD). Every
// field is optional.
type DeadQuery struct {
	// Kind keeps the dead letters of this kind's effectors; with ID, of
	// one effector. Both are subject filters: JetStream's per-subject
	// index finds them, whatever else the stream holds.
	Kind, ID string
	// Owner keeps dead letters whose record carries this EA-Owner.
	Owner string
	// Reason keeps dead letters with this reason code (EA-Dead-Reason:
	// decode, rejected, failed, …).
	Reason string
	// Text keeps dead letters whose error text, reason, record id or
	// record type contains it, ignoring case (at most [MaxSearch] bytes).
	Text string
	// Since and Until bound when the dead-letter stream stored the dead
	// letter (inclusive); zero means unbounded.
	Since, Until time.Time
	// Order: [OldestFirst] (default) or [NewestFirst].
	Order Order
	// Limit is the page size: 0 means [DefaultLimit]; at most [MaxLimit].
	Limit int
	// Cursor continues a previous page of the same query ([DeadPage.Cursor]).
	Cursor string
}

// DeadLetter is one dead letter as the dead-letter stream holds it: the
// record that could not be processed (its headers, with the dead letter's
// own: EA-Dead-Reason, EA-Error, where the original is) and its payload.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream.
	Seq uint64
	// Subject is <prefix>.dead.<kind>.<id>.
	Subject string
	// Stored is when the dead-letter stream stored it.
	Stored time.Time
	Header nats.Header
	Data   []byte
}

// DeadPage is one page of dead letters.
type DeadPage struct {
	DeadLetters []DeadLetter
	// Cursor continues after this page. Oldest first it is always set;
	// newest first it is empty once the beginning of the stream is reached.
	Cursor string
	// More reports whether more dead letters may match now.
	More bool
}

func (q DeadQuery) fingerprint() uint32 {
	return Query{Type: q.Kind + "/" + q.ID, Process: q.Reason + "\x00" + q.Text, Owner: q.Owner,
		Since: q.Since, Until: q.Until, Order: "dead:" + q.Order}.fingerprint()
}

func validSearch(name, text string) error {
	if len(text) > MaxSearch {
		return invalidf("%s: %d bytes, at most %d", name, len(text), MaxSearch)
	}
	return nil
}

// validate checks q and returns its page size and cursor position.
func (q DeadQuery) validate() (int, []uint64, error) {
	if q.Kind == "" && q.ID != "" {
		return 0, nil, invalidf("id %q without a kind: give both (the effector <kind>/<id>)", q.ID)
	}
	if q.Kind != "" {
		if err := records.ValidateKind(q.Kind); err != nil {
			return 0, nil, invalidf("kind: %v", err)
		}
	}
	if q.ID != "" {
		if err := records.ValidateID(q.ID); err != nil {
			return 0, nil, invalidf("id: %v", err)
		}
	}
	if q.Owner != "" {
		if err := records.ValidateOwner(q.Owner); err != nil {
			return 0, nil, invalidf("owner: %v", err)
		}
	}
	if err := validSearch("reason", q.Reason); err != nil {
		return 0, nil, err
	}
	if err := validSearch("text", q.Text); err != nil {
		return 0, nil, err
	}
	return validPage(q.Since, q.Until, q.Order, q.Limit, q.Cursor, q.fingerprint())
}

// validPage checks the time range, order, page size and cursor of a list
// and returns the page size and the cursor's position (nil: none).
func validPage(since, until time.Time, order Order, limit int, cur string, fp uint32) (int, []uint64, error) {
	pq := Query{Since: since, Until: until, Order: order, Limit: limit}
	if _, err := pq.validate(0); err != nil {
		return 0, nil, err
	}
	if cur == "" {
		return pq.Limit, nil, nil
	}
	pos, err := decodeCursor(cur, fp, 1)
	return pq.Limit, pos, err
}

// containsFold reports whether one of vals contains text, ignoring case.
func containsFold(text string, vals ...string) bool {
	if text == "" {
		return true
	}
	text = strings.ToLower(text)
	for _, v := range vals {
		if strings.Contains(strings.ToLower(v), text) {
			return true
		}
	}
	return false
}

// DeadLetters lists dead letters, a page at a time, in the order of the
// dead-letter stream (newest first with [NewestFirst]). Dead letters are
// never changed, only deleted, so paging has no gap and no duplicate; one
// discarded meanwhile is not listed. A page holds at most [MaxDeadPageBytes]
// of dead letters (at least one). Kind and ID select subjects; Owner,
// Reason, Text and the time bounds filter what those yield. Errors:
// [ErrInvalid] (with [ErrBadCursor] or [ErrPageTooLarge]) for a bad query,
// [ErrUnavailable] when the stream cannot be read.
func (c *Client) DeadLetters(ctx context.Context, q DeadQuery) (DeadPage, error) {
	limit, pos, err := q.validate()
	if err != nil {
		return DeadPage{}, err
	}
	filter := c.n.DeadLetters()
	if q.Kind != "" {
		id := q.ID
		if id == "" {
			id = "*" // every effector of the kind: <prefix>.dead.<kind>.*
		}
		filter = c.n.Dead(records.Ref{Kind: q.Kind, ID: id})
	}
	keep := func(m stored) bool {
		h := m.header
		if (q.Owner != "" && h.Get(records.HeaderOwner) != q.Owner) ||
			(q.Reason != "" && h.Get(records.HeaderDeadReason) != q.Reason) ||
			(!q.Until.IsZero() && m.time.After(q.Until)) || (!q.Since.IsZero() && m.time.Before(q.Since)) {
			return false
		}
		return containsFold(q.Text, h.Get(records.HeaderError), h.Get(records.HeaderDeadReason), h.Get(records.HeaderID), h.Get(records.HeaderType))
	}
	at := pos0(pos)
	newest := q.Order == NewestFirst
	scan := c.deadForward
	if newest {
		scan = c.deadBackward
	}
	items, next, more, err := scan(ctx, filter, keep, at, limit, q.Since, q.Until)
	if err != nil {
		return DeadPage{}, c.wrap(c.n.DeadStream(), err)
	}
	page := DeadPage{DeadLetters: make([]DeadLetter, 0, len(items)), Cursor: listCursor(q.fingerprint(), newest, more, next), More: more}
	for _, m := range items {
		page.DeadLetters = append(page.DeadLetters, DeadLetter{Seq: m.seq, Subject: m.subject, Stored: m.time, Header: m.header, Data: m.data})
	}
	return page, nil
}

// deadForward reads dead letters matching filter after sequence at (or
// from since, at 0), oldest first, up to limit that keep keeps, examining
// at most maxScan messages and deadReadBytes, and keeping at most
// MaxDeadPageBytes (at least one). It returns them, the last sequence
// consumed (the next page's start) and whether more may match.
func (c *Client) deadForward(ctx context.Context, filter string, keep func(stored) bool, at uint64, limit int, since, until time.Time) ([]stored, uint64, bool, error) {
	stream := c.n.DeadStream()
	var items []stored
	next, from := at, at+1
	var start *time.Time
	if at == 0 && !since.IsZero() {
		start, from = &since, 0
	}
	examined, read, kept := 0, 0, 0
	for {
		if examined >= maxScan || read >= deadReadBytes {
			return items, next, true, nil
		}
		got, pending, err := c.direct.batchMax(ctx, stream, filter, from, start, min(1000, maxScan-examined), deadReadBytes-read)
		if err != nil {
			return nil, 0, false, err
		}
		start = nil
		for _, m := range got {
			if !until.IsZero() && m.time.After(until) {
				return items, next, false, nil
			}
			examined++
			read += m.size()
			next = m.seq
			if keep(m) {
				if kept += m.size(); len(items) > 0 && kept > MaxDeadPageBytes {
					return items, m.seq - 1, true, nil // m starts the next page
				}
				if items = append(items, m); len(items) == limit {
					return items, next, true, nil
				}
			}
		}
		if len(got) == 0 || pending == 0 {
			return items, next, false, nil
		}
		from = next + 1
	}
}

// deadBackward reads dead letters matching filter below sequence hi (0:
// from the end), newest first, up to limit that keep keeps, in windows of
// sequences read whole (so what lies between the returned position and hi
// has been examined), examining at most maxScan messages and about
// deadReadBytes, and keeping at most MaxDeadPageBytes (at least one). It
// returns them, the exclusive upper bound of the next
// page and whether more may match.
func (c *Client) deadBackward(ctx context.Context, filter string, keep func(stored) bool, hi uint64, limit int, since, _ time.Time) ([]stored, uint64, bool, error) {
	stream := c.n.DeadStream()
	st, err := c.conn.JetStream().Stream(ctx, stream)
	if err != nil {
		return nil, 0, false, unavailable(stream, err)
	}
	state := st.CachedInfo().State
	first := max(state.FirstSeq, 1)
	if hi == 0 || hi > state.LastSeq+1 {
		hi = state.LastSeq + 1
	}
	var items []stored
	edge := hi
	window := uint64(min(4*limit, 16)) // small at first: dead letters may be big
	examined, read, kept := 0, 0, 0
	for edge > first {
		if examined >= maxScan || read >= deadReadBytes {
			return items, edge, true, nil
		}
		lo := first
		if edge-first > window {
			lo = edge - window
		}
		var chunk []stored
		inWindow, windowBytes, stopAtSince := 0, 0, false
		for from := lo; from < edge; {
			got, pending, err := c.direct.batchMax(ctx, stream, filter, from, nil, int(min(edge-from, 1000)), 0)
			if err != nil {
				return nil, 0, false, err
			}
			last := uint64(0)
			for _, m := range got {
				if m.seq >= edge {
					break
				}
				last = m.seq
				inWindow++
				windowBytes += m.size()
				if !since.IsZero() && m.time.Before(since) {
					stopAtSince = true
					continue
				}
				if keep(m) {
					chunk = append(chunk, m)
				}
			}
			if len(got) == 0 || pending == 0 || last == 0 || last+1 >= edge {
				break
			}
			from = last + 1
		}
		examined += inWindow
		read += windowBytes
		slices.Reverse(chunk)
		for _, m := range chunk {
			if kept += m.size(); len(items) > 0 && kept > MaxDeadPageBytes {
				return items, m.seq + 1, true, nil // m starts the next page
			}
			if items = append(items, m); len(items) == limit {
				return items, m.seq, true, nil
			}
		}
		edge = lo
		if stopAtSince {
			return items, edge, false, nil
		}
		// Grow the window, but not past what the budget can examine at
		// this window's density, nor past deadWindowBytes at the mean size.
		next := window * 4
		if inWindow > 0 {
			room := uint64(max(maxScan-examined, limit)) * window / uint64(inWindow)
			bytes := uint64(deadWindowBytes) * window / uint64(max(windowBytes, 1))
			next = max(min(next, room, bytes), 1)
		}
		window = next
	}
	return items, edge, false, nil
}

// scanOne reads one page of one record source below or after at (0: the
// start) in order, as [Client.Query] does for several: at most limit
// items, the position after them and whether more may match.
func (c *Client) scanOne(ctx context.Context, s source, newest bool, at uint64, limit int, since, until time.Time) ([]item, uint64, bool, error) {
	if newest && at == 1 { // exhausted earlier
		return nil, 1, false, nil
	}
	var res scanResult
	var err error
	if newest {
		res, err = c.backward(ctx, 0, s, at, limit, maxScan, since)
	} else {
		res, err = c.forward(ctx, 0, s, at, limit, maxScan, since, until)
	}
	if err != nil {
		return nil, 0, false, c.wrap(s.stream, err)
	}
	items, next, more := res.items, res.edge, !res.done
	if len(items) > limit { // backward reads whole windows
		items, next, more = items[:limit], items[limit-1].seq, true
	}
	if !newest && next < at {
		next = at
	}
	return items, next, more, nil
}

// listCursor is the cursor after a page ending at next: none newest first
// once nothing more can match.
func listCursor(fp uint32, newest, more bool, next uint64) string {
	if newest && !more {
		return ""
	}
	return encodeCursor(fp, []uint64{next})
}

// OrchListQuery selects orchestrations for [Client.ListOrchestrations].
// Every field is optional.
type OrchListQuery struct {
	// Status keeps only orchestrations with this status (one of
	// [OrchStatuses]); Name, of this definition; Owner, started for this
	// owner.
	Status, Name, Owner string
	// Search keeps orchestrations whose id (the process of its records)
	// or name contains it, ignoring case (at most [MaxSearch] bytes).
	Search string
	// Since and Until bound when the orchestration was created (started),
	// inclusive; zero means unbounded.
	Since, Until time.Time
	// Order: [OldestFirst] (default: least recently changed first) or
	// [NewestFirst] (most recently changed first).
	Order Order
	// Limit is the page size: 0 means [DefaultLimit]; at most [MaxLimit].
	Limit int
	// Cursor continues a previous page of the same query ([OrchPage.Cursor]).
	Cursor string
}

func (q OrchListQuery) fingerprint() uint32 {
	return Query{Type: q.Name, Process: q.Status + "\x00" + q.Search, Owner: q.Owner,
		Since: q.Since, Until: q.Until, Order: "orchlist:" + q.Order}.fingerprint()
}

// ListOrchestrations lists orchestrations from the orchestration bucket's
// stream in the order they last changed, filtered, a page at a time. It is
// [Client.Orchestrations] with a search, a time range and both orders.
//
// Oldest first, an orchestration that changes while a caller pages is
// listed again later, never missed. Newest first, pages go back in time
// and never list one twice; one that changes meanwhile moves ahead of the
// first page (follow the orchestration watch for those). Errors:
// [ErrInvalid] (with [ErrBadCursor] or [ErrPageTooLarge]) for a bad query,
// [ErrUnavailable] when the bucket cannot be read.
func (c *Client) ListOrchestrations(ctx context.Context, q OrchListQuery) (OrchPage, error) {
	if _, err := (OrchQuery{Status: q.Status, Name: q.Name, Owner: q.Owner, Limit: q.Limit}).validate(); err != nil {
		return OrchPage{}, err
	}
	if err := validSearch("search", q.Search); err != nil {
		return OrchPage{}, err
	}
	limit, pos, err := validPage(q.Since, q.Until, q.Order, q.Limit, q.Cursor, q.fingerprint())
	if err != nil {
		return OrchPage{}, err
	}
	keep := func(data []byte, seq uint64) (Orchestration, bool) {
		var o Orchestration
		if codec.Unmarshal(data, &o) != nil {
			return o, false
		}
		if (q.Status != "" && o.Status != q.Status) || (q.Name != "" && o.Name != q.Name) || (q.Owner != "" && o.Owner != q.Owner) ||
			(!q.Since.IsZero() && o.Created.Before(q.Since)) || (!q.Until.IsZero() && o.Created.After(q.Until)) ||
			!containsFold(q.Search, o.ID, o.Name) {
			return o, false
		}
		o.Revision = seq
		return o, true
	}
	stream := c.n.OrchStream()
	if q.Order != NewestFirst {
		orchs, next, more, err := pageLatest(ctx, c, stream, c.n.OrchFilter(), pos0(pos), limit, func(m stored) (Orchestration, bool) {
			return keep(m.data, m.seq)
		})
		if err != nil {
			return OrchPage{}, err
		}
		return OrchPage{Orchestrations: orchs, More: more, Cursor: encodeCursor(q.fingerprint(), []uint64{next})}, nil
	}
	// Newest first: read back through the stream, keeping a revision only
	// when it is its orchestration's latest (an older one was superseded,
	// ahead of this page or after it).
	src := source{stream: stream, filter: c.n.OrchFilter(), keep: func(it item) bool {
		if it.msg.header.Get("KV-Operation") != "" {
			return false // a deletion or purge
		}
		_, ok := keep(it.msg.data, it.seq)
		return ok
	}}
	// Stale revisions make a scan's page short: go on until it is full or
	// the stream's start. An orchestration keeps at most bus.OrchHistory
	// revisions, so a full page is at most that many times limit revisions
	// away (more only when orchestrations change while the list is read):
	// past that, the page ends short, with more set.
	at := pos0(pos)
	page := OrchPage{Orchestrations: []Orchestration{}}
	more := true
	for examined := 0; more && len(page.Orchestrations) < limit && examined < bus.OrchHistory*limit; {
		var items []item
		items, at, more, err = c.scanOne(ctx, src, true, at, limit-len(page.Orchestrations), time.Time{}, time.Time{})
		if err != nil {
			return OrchPage{}, err
		}
		examined += max(len(items), 1)
		refs := make([]getRef, len(items))
		for i, it := range items {
			refs[i] = getRef{stream: stream, last: it.msg.subject}
		}
		latest, err := c.direct.get(ctx, refs)
		if err != nil {
			return OrchPage{}, c.wrap(stream, err)
		}
		for i, it := range items {
			if latest[i].seq != it.seq {
				continue // changed since: listed where its latest revision is
			}
			o, _ := keep(it.msg.data, it.seq)
			page.Orchestrations = append(page.Orchestrations, o)
		}
	}
	page.More = more
	page.Cursor = listCursor(q.fingerprint(), true, more, at)
	return page, nil
}

func pos0(pos []uint64) uint64 {
	if pos == nil {
		return 0
	}
	return pos[0]
}
