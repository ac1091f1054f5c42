package store

import (
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/effectors/effectors/records"
)

// Box selects the mailbox, the outbox or both of effectors.
type Box string

// Boxes.
const (
	BoxBoth    Box = ""        // mailboxes and outboxes
	BoxMailbox Box = "mailbox" // records effectors received
	BoxOutbox  Box = "outbox"  // records effectors emitted
)

// Order is the order of a query's results.
type Order string

// Orders.
const (
	OldestFirst Order = ""       // ascending: tail the log by following the cursor
	NewestFirst Order = "newest" // descending: the cursor pages back in time
)

// Page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// maxScan bounds how many log or index entries one page examines per
// source. A query whose filters match rarely returns a short (even empty)
// page with More set and a cursor to continue from.
const maxScan = 20_000

// Query selects records of the log (mailboxes and outboxes). Every field is
// optional; the zero Query lists every record, oldest first.
//
// Choose a selector that is indexed: Process (the per-process index),
// Owner (the per-owner index),
// Effector (the effector's own subjects), Type (the per-type index). With
// none, the query reads the log itself (with Since, starting at that time).
// The other fields filter what the selector yields, so a page may come
// back short: follow the cursor while More is true.
type Query struct {
	// Effector restricts to one effector's records, in its Box.
	Effector records.Ref
	// Box: mailbox, outbox or both ([BoxBoth]).
	Box Box
	// Process restricts to records with this EA-Process.
	Process string
	// Owner restricts to records with this EA-Owner (the owner index).
	Owner string
	// Type restricts to records with this EA-Type ("message" matches records
	// without the header).
	Type string
	// Since and Until bound when the log stored the record (inclusive);
	// zero means unbounded. This is the stream's own time, not the sender's
	// EA-Time.
	Since, Until time.Time
	// Order: [OldestFirst] (default) or [NewestFirst].
	Order Order
	// Limit is the page size: 0 means [DefaultLimit]; at most [MaxLimit].
	Limit int
	// Cursor continues a previous page of the same query (its
	// [Page.Cursor]); empty starts at the beginning (oldest first) or the
	// end (newest first).
	Cursor string
}

// Page is one page of a query's results.
type Page struct {
	Records []Record
	// Cursor continues after this page. Oldest first it is always set: use
	// it later to read what arrives after. Newest first it is empty once the
	// beginning of the log is reached.
	Cursor string
	// More reports whether more records may match now (the page ended at
	// its limit or its scan budget, not at the end of the log).
	More bool
}

// Record is a record read from the log.
type Record struct {
	// Record is the envelope and payload. Its Subject is the subject as
	// publishers write it (a mailbox without the partition token), its Seq
	// the sequence in Stream.
	records.Record
	// Stream is the stream holding it (EA_MBOX or EA_OUT).
	Stream string
	// Box says whether it is a mailbox or an outbox record.
	Box Box
	// Effector is the effector whose mailbox or outbox holds it.
	Effector records.Ref
	// Stored is when the stream stored it.
	Stored time.Time
	// Invalid is set when the message breaks the record contract
	// ([records.FromMsg] refused it): the record then carries only its id,
	// subject, sequence and raw payload.
	Invalid string
}

// validate checks q and fills in defaults. It returns the decoded cursor
// positions (nil when none).
func (q *Query) validate(sources int) ([]uint64, error) {
	pos, _, err := q.validateV(sources)
	return pos, err
}

// validateV is validate that also returns the cursor's format (see
// [cursor]).
func (q *Query) validateV(sources int) ([]uint64, int, error) {
	if !q.Effector.IsZero() {
		if err := q.Effector.Validate(); err != nil {
			return nil, 0, invalidf("effector %q: %v", q.Effector.String(), err)
		}
	}
	switch q.Box {
	case BoxBoth, BoxMailbox, BoxOutbox:
	default:
		return nil, 0, invalidf("box %q: must be mailbox, outbox or empty (both)", q.Box)
	}
	if q.Process != "" {
		if err := (records.Record{Process: q.Process}).Validate(); err != nil {
			return nil, 0, invalidf("process: %v", err)
		}
	}
	if q.Type != "" {
		if err := (records.Record{Type: q.Type}).Validate(); err != nil {
			return nil, 0, invalidf("type: %v", err)
		}
	}
	if q.Owner != "" {
		if err := records.ValidateOwner(q.Owner); err != nil {
			return nil, 0, invalidf("owner: %v", err)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return nil, 0, invalidf("until %s is before since %s", q.Until.Format(time.RFC3339Nano), q.Since.Format(time.RFC3339Nano))
	}
	switch q.Order {
	case OldestFirst, NewestFirst:
	default:
		return nil, 0, invalidf("order %q: must be newest or empty (oldest first)", q.Order)
	}
	switch {
	case q.Limit < 0:
		return nil, 0, invalidf("limit %d: must be 0 (default %d) to %d", q.Limit, DefaultLimit, MaxLimit)
	case q.Limit > MaxLimit:
		return nil, 0, invalid(ErrPageTooLarge, "limit %d: at most %d", q.Limit, MaxLimit)
	case q.Limit == 0:
		q.Limit = DefaultLimit
	}
	if q.Cursor == "" {
		return nil, 0, nil
	}
	return decodeCursorV(q.Cursor, q.fingerprint(), sources)
}

// fingerprint identifies what a cursor continues: every field but Limit
// and Cursor.
func (q Query) fingerprint() uint32 {
	h := fnv.New32a()
	for _, s := range []string{q.Effector.String(), string(q.Box), q.Process, q.Type,
		strconv.FormatInt(unixNano(q.Since), 10), strconv.FormatInt(unixNano(q.Until), 10), string(q.Order)} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	if q.Owner != "" { // only when set: cursors issued before owners existed stay valid
		_, _ = h.Write([]byte("owner\x00" + q.Owner))
	}
	return h.Sum32()
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// cursor is the decoded form of a cursor: a format, the query's
// fingerprint and one position per source (the last sequence consumed
// oldest first, the exclusive upper bound newest first). Format 2 is a
// query's cursor whose positions in an index are entries of index
// messages (see indexPos); in format 1 they were message sequences.
type cursor struct {
	V int      `json:"v"`
	F uint32   `json:"f"`
	P []uint64 `json:"p"`
}

func encodeCursor(fp uint32, pos []uint64) string { return encodeCursorV(1, fp, pos) }

func encodeCursorV(v int, fp uint32, pos []uint64) string {
	b, _ := json.Marshal(cursor{V: v, F: fp, P: pos})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, fp uint32, sources int) ([]uint64, error) {
	pos, _, err := decodeCursorV(s, fp, sources)
	return pos, err
}

func decodeCursorV(s string, fp uint32, sources int) ([]uint64, int, error) {
	if len(s) > 512 {
		return nil, 0, invalid(ErrBadCursor, "%d characters: not a cursor of this store", len(s))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, 0, invalid(ErrBadCursor, "not a cursor of this store: %v", err)
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.V != 1 && c.V != 2 {
		return nil, 0, invalid(ErrBadCursor, "not a cursor of this store")
	}
	if c.F != fp {
		return nil, 0, invalid(ErrBadCursor, "the cursor belongs to another query (same filters and order required)")
	}
	if len(c.P) != sources {
		return nil, 0, invalid(ErrBadCursor, "the cursor has %d positions, this query %d", len(c.P), sources)
	}
	return c.P, c.V, nil
}
