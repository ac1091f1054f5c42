package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// OrchStatuses are the statuses an orchestration can have (the values of
// supervisor.Status).
var OrchStatuses = []string{"RUNNING", "WAITING", "COMPLETED", "FAILED", "CANCELLED"}

// Orchestration is an orchestration as the orchestration bucket
// (<prefix>_orch) holds it: the fields supervisors write that say where it
// stands (the graph checkpoint, pending answers and task payloads are left
// out), and its revision in the bucket (a resume point for
// [Client.WatchOrchestrations]).
//
// It is not supervisor.Orchestration on purpose: it is a row of a listing,
// with the revision a watch resumes from and without the prompt, results
// and tasks (pages of them stay small), and package store sits below
// supervisor (nodes run it; it must not pull in the graph engine), so it
// reads the bucket's record itself.
type Orchestration struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
	// Step is the graph node it is at; Steps counts the changes applied.
	Step       string    `json:"step"`
	Steps      int       `json:"steps"`
	WaitingFor string    `json:"waiting_for,omitempty"`
	Error      string    `json:"error,omitempty"`
	Owner      string    `json:"owner,omitempty"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	Revision   uint64    `json:"revision"`
}

// OrchQuery selects orchestrations. Every field is optional.
type OrchQuery struct {
	// Status keeps only orchestrations with this status (one of
	// [OrchStatuses]).
	Status string
	// Name keeps only orchestrations of this definition.
	Name string
	// Owner keeps only orchestrations started for this owner.
	Owner string
	// Limit is the page size: 0 means [DefaultLimit]; at most [MaxLimit].
	Limit int
	// Cursor continues a previous page ([OrchPage.Cursor]).
	Cursor string
}

// OrchPage is one page of orchestrations.
type OrchPage struct {
	Orchestrations []Orchestration
	// Cursor continues after this page; always set, so that a caller can
	// later list orchestrations started or changed since.
	Cursor string
	// More reports whether the page ended before the end of the bucket.
	More bool
}

func (q OrchQuery) fingerprint() uint32 {
	return Query{Type: q.Name, Process: q.Status, Owner: q.Owner, Order: "orchestrations"}.fingerprint()
}

// validate checks q and returns the page size.
func (q OrchQuery) validate() (int, error) {
	if q.Status != "" && !slices.Contains(OrchStatuses, q.Status) {
		return 0, invalidf("status %q: must be one of %s, or empty", q.Status, strings.Join(OrchStatuses, ", "))
	}
	if q.Name != "" {
		if err := records.ValidateKind(q.Name); err != nil {
			return 0, invalidf("name %q: not an orchestration name (1-128 characters of A-Z a-z 0-9 _ -)", q.Name)
		}
	}
	if q.Owner != "" {
		if err := records.ValidateOwner(q.Owner); err != nil {
			return 0, invalidf("owner: %v", err)
		}
	}
	pq := Query{Limit: q.Limit}
	if _, err := pq.validate(0); err != nil {
		return 0, err
	}
	return pq.Limit, nil
}

// Orchestrations lists orchestrations from the orchestration bucket, in the
// order they were last changed, filtered by status and name, a page at a
// time (as [Client.Effectors] lists state documents: an orchestration that
// changes while a caller pages is listed again later, never missed; a page
// costs reads in proportion to its size). Errors: [ErrInvalid] for a bad
// status, name, limit or cursor ([ErrBadCursor], [ErrPageTooLarge]).
func (c *Client) Orchestrations(ctx context.Context, q OrchQuery) (OrchPage, error) {
	limit, err := q.validate()
	if err != nil {
		return OrchPage{}, err
	}
	var pos uint64
	if q.Cursor != "" {
		p, err := decodeCursor(q.Cursor, q.fingerprint(), 1)
		if err != nil {
			return OrchPage{}, err
		}
		pos = p[0]
	}
	orchs, pos, more, err := pageLatest(ctx, c, c.n.OrchStream(), c.n.OrchFilter(), pos, limit, func(m stored) (Orchestration, bool) {
		var o Orchestration
		if codec.Unmarshal(m.data, &o) != nil {
			return o, false
		}
		if (q.Status != "" && o.Status != q.Status) || (q.Name != "" && o.Name != q.Name) || (q.Owner != "" && o.Owner != q.Owner) {
			return o, false
		}
		o.Revision = m.seq
		return o, true
	})
	if err != nil {
		return OrchPage{}, err
	}
	return OrchPage{Orchestrations: orchs, More: more, Cursor: encodeCursor(q.fingerprint(), []uint64{pos})}, nil
}

// OrchEvent is a change of one orchestration.
type OrchEvent struct {
	ID string
	// Revision is the orchestration's revision in the bucket: pass it + 1
	// as From to resume after this event.
	Revision uint64
	// Orchestration is the orchestration after the change; zero when
	// Deleted.
	Orchestration Orchestration
	Deleted       bool
}

// OrchWatchOptions selects what [Client.WatchOrchestrations] follows.
type OrchWatchOptions struct {
	// ID narrows the watch to one orchestration; empty follows all.
	ID string
	// From resumes at this revision of the orchestration bucket (every
	// change at or after it is delivered, as long as the bucket keeps it:
	// the last 5 revisions of each orchestration). 0 starts with the
	// current orchestrations, then follows changes.
	From uint64
}

// OrchWatcher follows orchestrations; see [Client.WatchOrchestrations].
// Events delivers the changes in order and is closed when the watcher stops
// (see Err); Stop stops it and waits for it to end.
type OrchWatcher struct{ *feed[OrchEvent] }

// WatchOrchestrations follows the status of one orchestration (ID) or of
// all, from a resume point. It ends when ctx ends or Stop is called. Other
// languages watch the same with a KV watch of bucket <prefix>_orch, key
// <id> or > (subjects $KV.<prefix>_orch.<id>), resuming from a revision.
func (c *Client) WatchOrchestrations(ctx context.Context, o OrchWatchOptions) (*OrchWatcher, error) {
	key := ">"
	if o.ID != "" {
		if err := records.ValidateKind(o.ID); err != nil {
			return nil, invalidf("orchestration id %q: not an orchestration id (1-128 characters of A-Z a-z 0-9 _ -)", o.ID)
		}
		key = o.ID
	}
	f, err := watchBucket(ctx, c, c.n.OrchBucket(), key, o.From, func(e jetstream.KeyValueEntry) (OrchEvent, error) {
		ev := OrchEvent{ID: e.Key(), Revision: e.Revision()}
		if e.Operation() != jetstream.KeyValuePut {
			ev.Deleted = true
		} else if err := codec.Unmarshal(e.Value(), &ev.Orchestration); err != nil {
			return ev, fmt.Errorf("orchestration %s at revision %d: %w", e.Key(), e.Revision(), err)
		} else {
			ev.Orchestration.Revision = e.Revision()
		}
		return ev, nil
	})
	if err != nil {
		return nil, err
	}
	return &OrchWatcher{f}, nil
}
