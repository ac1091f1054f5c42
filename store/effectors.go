package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// Kind is a kind some node announces.
type Kind struct {
	Kind string `json:"kind"`
	// Nodes are the ids of the nodes announcing it in placement, sorted.
	Nodes []string `json:"nodes"`
	// Beat is the latest heartbeat of those nodes. A node that stopped
	// cleanly removes its announcement; one that crashed leaves it until
	// placement clears it, so a Beat older than the nodes' heartbeat TTL (3s
	// by default) means no node is alive to host the kind.
	Beat time.Time `json:"beat"`
}

// memberDoc is a node's heartbeat in the placement bucket (key
// node.<id>), as actor's placement writes it.
type memberDoc struct {
	ID    string    `json:"id"`
	Kinds []string  `json:"kinds"`
	Beat  time.Time `json:"beat"`
}

// Kinds lists the kinds the nodes announce in placement (heartbeats under
// node.<id> in the placement bucket), with the nodes hosting each, sorted
// by kind.
func (c *Client) Kinds(ctx context.Context) ([]Kind, error) {
	bucket, err := c.conn.JetStream().KeyValue(ctx, c.n.PlaceBucket())
	if err != nil {
		return nil, unavailable(c.n.PlaceBucket(), err)
	}
	lister, err := bucket.ListKeysFiltered(ctx, c.n.NodeKeys())
	if err != nil {
		return nil, unavailable(c.n.PlaceBucket(), err)
	}
	hosts := map[string][]string{}
	beats := map[string]time.Time{}
	for key := range lister.Keys() {
		e, err := bucket.Get(ctx, key)
		if err != nil {
			continue // gone since listed
		}
		var m memberDoc
		if codec.Unmarshal(e.Value(), &m) != nil {
			continue
		}
		for _, k := range m.Kinds {
			hosts[k] = append(hosts[k], m.ID)
			if m.Beat.After(beats[k]) {
				beats[k] = m.Beat
			}
		}
	}
	out := make([]Kind, 0, len(hosts))
	for k, nodes := range hosts {
		slices.Sort(nodes)
		out = append(out, Kind{Kind: k, Nodes: nodes, Beat: beats[k]})
	}
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(a.Kind, b.Kind) })
	return out, nil
}

// EffectorQuery selects effectors of one kind.
type EffectorQuery struct {
	Kind string
	// Status keeps only effectors with this status (empty: all).
	Status actor.Status
	// Owner keeps only effectors created for this owner (empty: all).
	Owner string
	// Limit is the page size: 0 means [DefaultLimit]; at most [MaxLimit].
	Limit int
	// Cursor continues a previous page ([EffectorPage.Cursor]).
	Cursor string
}

// Effector is one effector's state document and its revision in the state
// bucket (a resume point for [Client.Watch]).
type Effector struct {
	actor.Document
	Revision uint64 `json:"revision"`
}

// EffectorPage is one page of effectors.
type EffectorPage struct {
	Effectors []Effector
	// Cursor continues after this page; always set, so that a caller can
	// later list effectors created or changed since.
	Cursor string
	// More reports whether the page ended before the end of the bucket.
	More bool
}

func (q EffectorQuery) fingerprint() uint32 {
	return Query{Type: q.Kind, Process: string(q.Status), Owner: q.Owner, Order: "effectors"}.fingerprint()
}

// Effectors lists the effectors of a kind from the state bucket, in the
// order their documents were last written (a document written while a
// caller pages appears again later: effectors are never missed, and may be
// listed twice); with stream groups, group by group. A page costs reads proportional to its size, not to the
// number of effectors. Errors: [ErrUnknownKind] for a kind no node
// announces and no state document has, [ErrInvalid] for a bad status,
// limit or cursor.
func (c *Client) Effectors(ctx context.Context, q EffectorQuery) (EffectorPage, error) {
	if err := records.ValidateKind(q.Kind); err != nil {
		return EffectorPage{}, invalidf("kind: %v", err)
	}
	switch q.Status {
	case "", actor.StatusIdle, actor.StatusProcessing, actor.StatusError, actor.StatusTerminated:
	default:
		return EffectorPage{}, invalidf("status %q: must be IDLE, PROCESSING, ERROR, TERMINATED or empty", q.Status)
	}
	if q.Owner != "" {
		if err := records.ValidateOwner(q.Owner); err != nil {
			return EffectorPage{}, invalidf("owner: %v", err)
		}
	}
	pq := Query{Limit: q.Limit}
	if _, err := pq.validate(0); err != nil {
		return EffectorPage{}, err
	}
	limit := pq.Limit
	groups := c.n.Groups()
	pos := make([]uint64, groups) // per stream group's state bucket
	if q.Cursor != "" {
		p, err := decodeCursor(q.Cursor, q.fingerprint(), groups)
		if err != nil {
			return EffectorPage{}, err
		}
		pos = p
	}
	keep := func(m stored) (Effector, bool) {
		var doc actor.Document
		if codec.Unmarshal(m.data, &doc) != nil {
			return Effector{}, false
		}
		if (q.Status != "" && doc.Status != q.Status) || (q.Owner != "" && doc.Owner != q.Owner) {
			return Effector{}, false
		}
		return Effector{Document: doc, Revision: m.seq}, true
	}
	// With stream groups the buckets are listed one after the other, each
	// from its own position: a bucket listed to its end is read again
	// from there on later pages, for documents written since.
	if groups == 1 {
		// A connection not told the layout: refuse rather than list a
		// bucket that is not the deployment's.
		if err := c.conn.OneStream(ctx, "listing effectors on a connection not told the stream group count"); err != nil {
			return EffectorPage{}, err
		}
	}
	var effectors []Effector
	more := false
	for g := range groups {
		if len(effectors) == limit {
			more = true // the groups after g are not looked at yet
			break
		}
		bucket := c.n.StateBucketOf(g)
		got, p, m, err := pageLatest(ctx, c, "KV_"+bucket, "$KV."+bucket+"."+q.Kind+".*", pos[g], limit-len(effectors), keep)
		if err != nil {
			return EffectorPage{}, err
		}
		effectors, pos[g] = append(effectors, got...), p
		if m {
			more = true
			break
		}
	}
	if q.Cursor == "" && !slices.ContainsFunc(pos, func(p uint64) bool { return p > 0 }) {
		// The kind has no state document at all.
		if err := c.knownKind(ctx, q.Kind); err != nil {
			return EffectorPage{}, err
		}
	}
	return EffectorPage{Effectors: effectors, More: more, Cursor: encodeCursor(q.fingerprint(), pos)}, nil
}

// knownKind fails with ErrUnknownKind unless a node announces kind.
func (c *Client) knownKind(ctx context.Context, kind string) error {
	kinds, err := c.Kinds(ctx)
	if err != nil {
		return err
	}
	for _, k := range kinds {
		if k.Kind == kind {
			return nil
		}
	}
	return invalid(ErrUnknownKind, "kind %q: no node hosts it and no effector of it exists", kind)
}

// StateEvent is a change of one effector's state document.
type StateEvent struct {
	Effector records.Ref
	// Bucket is the state bucket holding the document (ea_state, or with
	// stream groups its group's, ea_state_<g>_of_<G>), and Revision the
	// document's revision in it: a revision means something in its own
	// bucket only. To resume after this event, pass Revision + 1 as From
	// (one bucket), or keep a vector: Positions.Seen(Bucket, Revision).
	Bucket   string
	Revision uint64
	// Document is the new document; zero when Deleted.
	Document actor.Document
	Deleted  bool
}

// WatchOptions selects what [Client.Watch] follows.
type WatchOptions struct {
	// Kind is required; ID narrows the watch to one effector.
	Kind, ID string
	// From resumes at this revision of the state bucket (every change at or
	// after it is delivered, as long as the bucket keeps it). 0 starts with
	// the current documents, then follows changes. With stream groups a
	// watch of every effector of a kind follows every group's bucket, each
	// with revisions of its own, and takes From 0 only: resume it with
	// Positions.
	From uint64
	// Positions resumes at a revision per bucket, keyed by bucket name
	// (StateEvent.Bucket), each the next revision to read (the last one
	// read + 1; [actor.Positions.Seen] keeps it so): every change at or
	// after it is delivered, as long as the bucket keeps it. A bucket it
	// does not name starts with its current documents, then changes (as
	// From 0), so nothing is lost of what it holds. It works with one
	// bucket too (one entry, as From) and with one effector (the entry of
	// its bucket), so one way of resuming serves every layout. Non-nil (even
	// empty) means it is used; not with From. A bucket that is not one of
	// the deployment's, or a position 0, is ErrInvalid.
	Positions actor.Positions
}

// Watcher follows state documents; see [Client.Watch]. Events delivers the
// changes in order and is closed when the watcher stops (see Err); Stop
// stops it and waits for it to end.
type Watcher struct{ *feed[StateEvent] }

// Watch follows the state documents of one effector (Kind and ID) or of
// every effector of a kind (Kind), from a resume point. It ends when ctx
// ends or Stop is called. Each effector's changes come in order; with
// stream groups a kind's buckets are followed at once, their events
// interleaved.
func (c *Client) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	if err := records.ValidateKind(o.Kind); err != nil {
		return nil, invalidf("kind: %v", err)
	}
	key, buckets := o.Kind+".*", c.n.StateBuckets()
	if o.ID != "" {
		if err := records.ValidateID(o.ID); err != nil {
			return nil, invalidf("id: %v", err)
		}
		key = o.Kind + "." + o.ID
		buckets = []string{c.n.StateBucketFor(records.Ref{Kind: o.Kind, ID: o.ID})}
	} else if c.n.Groups() == 1 {
		// A connection not told the layout: refuse rather than watch a
		// bucket that is not the deployment's.
		if err := c.conn.OneStream(ctx, "watching every effector of a kind on a connection not told the stream group count"); err != nil {
			return nil, err
		}
	}
	froms, err := c.watchFroms(o, buckets)
	if err != nil {
		return nil, err
	}
	f, err := watchBuckets(ctx, c, buckets, key, froms, func(e jetstream.KeyValueEntry) (StateEvent, error) {
		kind, id, _ := strings.Cut(e.Key(), ".")
		ev := StateEvent{Effector: records.Ref{Kind: kind, ID: id}, Bucket: e.Bucket(), Revision: e.Revision()}
		if e.Operation() != jetstream.KeyValuePut {
			ev.Deleted = true
		} else if err := codec.Unmarshal(e.Value(), &ev.Document); err != nil {
			return ev, fmt.Errorf("state document %s of %s at revision %d: %w", e.Key(), e.Bucket(), e.Revision(), err)
		}
		return ev, nil
	})
	if err != nil {
		return nil, err
	}
	return &Watcher{f}, nil
}

// watchFroms is the revision each of buckets starts at by o (0: the
// current documents): o.From for one bucket, or each bucket's entry in
// o.Positions.
func (c *Client) watchFroms(o WatchOptions, buckets []string) ([]uint64, error) {
	froms := make([]uint64, len(buckets))
	switch {
	case o.Positions != nil && o.From != 0:
		return nil, invalidf("from %d and positions %s: give one (positions: a revision per state bucket)", o.From, o.Positions)
	case o.Positions != nil:
		if err := o.Positions.Check(c.n.StateBuckets()); err != nil {
			return nil, fmt.Errorf("%w: positions %s: %w: build them from events of this deployment (Positions.Seen with StateEvent.Bucket and Revision)", ErrInvalid, o.Positions, err)
		}
		for i, b := range buckets {
			froms[i] = o.Positions[b]
		}
	case o.From != 0 && len(buckets) > 1:
		return nil, invalidf("from %d: a revision of one state bucket, and this deployment has %d stream groups, each with its own: resume with Positions (a revision per bucket: StateEvent.Bucket and Revision + 1 of the last event of each), watch from 0, or watch one effector", o.From, len(buckets))
	default:
		for i := range froms {
			froms[i] = o.From
		}
	}
	return froms, nil
}

func actorStatus(s string) actor.Status { return actor.Status(s) }

// MarshalJSON renders the document as [actor.Document] does, with the
// revision.
func (e Effector) MarshalJSON() ([]byte, error) {
	b, err := e.Document.MarshalJSON()
	if err != nil {
		return nil, err
	}
	rev, _ := json.Marshal(e.Revision)
	return append(append(b[:len(b)-1:len(b)-1], `,"revision":`...), append(rev, '}')...), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Effector) UnmarshalJSON(data []byte) error {
	var rev struct {
		Revision uint64 `json:"revision"`
	}
	if err := json.Unmarshal(data, &rev); err != nil {
		return err
	}
	if err := e.Document.UnmarshalJSON(data); err != nil {
		return err
	}
	e.Revision = rev.Revision
	return nil
}
