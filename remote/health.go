package remote

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// HeaderProbe marks a probe: a request on a kind's logic subject with this
// header and no body, which asks only whether a worker is subscribed there.
// NATS answers "no responders" at once when none is. A worker should
// answer it at once with an empty reply (any reply will do: a worker that
// does not know probes answers an error about the empty request, which the
// node ignores as it ignores every probe reply's content).
const HeaderProbe = "EA-Probe"

// Timings of the watch over a request in flight and of the kind endpoint's
// questions to the workers.
const (
	// probeAfter is how long a request waits before the node starts asking
	// whether a worker is still subscribed (a worker killed holding the
	// request never answers it; with no worker left, waiting for the
	// timeout is pointless).
	probeAfter = 500 * time.Millisecond
	// probeEvery is how often it asks again.
	probeEvery = 500 * time.Millisecond
	// probeWait bounds one probe; a worker too busy to answer in time is
	// there all the same.
	probeWait = 500 * time.Millisecond
	// discoverMax bounds a count of the workers (the kind endpoint), and
	// discoverQuiet ends it early once that long passed without a new
	// worker answering.
	discoverMax   = 500 * time.Millisecond
	discoverQuiet = 100 * time.Millisecond
	// maxWorkers bounds the workers one count tells apart.
	maxWorkers = 10000
	// maxTracked bounds the effectors a kind tracks as waiting; more are
	// counted, not named.
	maxTracked = 10000
)

// errWorkerGone is the cause with which the watch of a request in flight
// ends it: no worker is subscribed any more.
var errWorkerGone = errors.New("no worker is subscribed any more")

// health is what a remote kind knows of its workers on this node: whether
// its requests are answered, and which effectors wait for a worker. A run
// of requests that find no worker or go unanswered is an episode, logged
// once: a WARN naming the kind and the subject when it starts, an INFO when
// a worker answers again. Safe for concurrent use.
type health struct {
	kind, subject string
	log           *slog.Logger
	// stale drops a waiting effector not heard of for this long: its record
	// went to dead letters, or its effector moved to another node.
	stale time.Duration

	mu       sync.Mutex // guards the fields below
	down     time.Time  // start of the current episode; zero: none
	problem  string     // the latest failure of the episode
	waiting  map[records.Ref]*waitEntry
	untraced int // failed requests of effectors past maxTracked, this episode
}

// waitEntry is an effector whose record in hand waits for a worker.
type waitEntry struct {
	record      string
	since, last time.Time
	attempts    int
	reason      string
}

func newHealth(kind, subject string, log *slog.Logger, stale time.Duration) *health {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &health{kind: kind, subject: subject, log: log, stale: stale, waiting: map[records.Ref]*waitEntry{}}
}

// failed notes that a request about record rec of ref found no worker or
// went unanswered (err), and logs the start of an episode.
func (h *health) failed(ref records.Ref, rec string, err error, now time.Time) {
	reason := err.Error()
	h.mu.Lock()
	start := h.down.IsZero()
	if start {
		h.down, h.untraced = now, 0
	}
	h.problem = reason
	h.prune(now)
	e := h.waiting[ref]
	switch {
	case e != nil && e.record == rec:
	case e == nil && len(h.waiting) >= maxTracked:
		h.untraced++
	default:
		e = &waitEntry{record: rec, since: now}
		h.waiting[ref] = e
	}
	if e != nil {
		e.last, e.reason = now, reason
		e.attempts++
	}
	h.mu.Unlock()
	if start {
		h.log.Warn("remote kind stalled: its requests find no worker or go unanswered; its effectors' records wait and are retried",
			"kind", h.kind, "subject", h.subject, "effector", ref.String(), "err", reason,
			"fix", "start a worker of kind "+h.kind+" (docs/polyglot.md); ea kinds counts the workers that answer")
	}
}

// answered notes that a worker answered the request about ref, and logs
// the end of an episode.
func (h *health) answered(ref records.Ref, now time.Time) {
	h.mu.Lock()
	delete(h.waiting, ref)
	since := h.down
	h.down, h.problem = time.Time{}, ""
	h.mu.Unlock()
	if !since.IsZero() {
		h.log.Info("remote kind's workers answer again", "kind", h.kind, "subject", h.subject,
			"stalled_for", now.Sub(since).Round(time.Millisecond))
	}
}

// forget drops ref: its attempt ended for a reason of its own (cancelled,
// a record the worker never saw).
func (h *health) forget(ref records.Ref) {
	h.mu.Lock()
	delete(h.waiting, ref)
	h.mu.Unlock()
}

// prune drops stale entries. h.mu is held.
func (h *health) prune(now time.Time) {
	for ref, e := range h.waiting {
		if now.Sub(e.last) > h.stale {
			delete(h.waiting, ref)
		}
	}
}

// stalled reports whether an episode runs, and how many effectors wait.
func (h *health) stalled(now time.Time) (bool, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prune(now)
	return !h.down.IsZero(), len(h.waiting)
}

// fill writes the episode and the waiting effectors (only ref's when id is
// set) into ri.
func (h *health) fill(ri *actor.RemoteInfo, id string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prune(now)
	ri.Down, ri.Problem = h.down, h.problem
	for ref, e := range h.waiting {
		if id != "" && ref.ID != id {
			continue
		}
		if len(ri.Waiting) == actor.MaxWaiting {
			ri.WaitingMore++
			continue
		}
		ri.Waiting = append(ri.Waiting, actor.Waiting{Effector: ref.String(), Record: e.record, Since: e.since, Attempts: e.attempts, Reason: e.reason})
	}
	if id == "" {
		ri.WaitingMore += h.untraced
	}
	slices.SortFunc(ri.Waiting, func(a, b actor.Waiting) int { return a.Since.Compare(b.Since) })
}

// watch runs beside a request in flight until done closes: from probeAfter
// on, every probeEvery, it asks whether a worker is still subscribed on the
// logic subject, and ends the request (cancel, cause errWorkerGone) when
// NATS answers that none is. A worker killed holding the request then
// costs about a second instead of the whole timeout when no worker is left.
func (l *logic) watch(ctx context.Context, done <-chan struct{}, cancel context.CancelCauseFunc) {
	t := time.NewTimer(probeAfter)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.present(ctx) == absent {
			cancel(errWorkerGone)
			return
		}
		t.Reset(probeEvery)
	}
}

// presence is what a probe found.
type presence int

const (
	unknown presence = iota // the probe failed (connection down, cancelled)
	present                 // a worker answered, or is too busy to
	absent                  // NATS answered "no responders"
)

// present probes the logic subject (see [HeaderProbe]).
func (l *logic) present(parent context.Context) presence {
	ctx, cancel := context.WithTimeout(parent, probeWait)
	defer cancel()
	msg := &nats.Msg{Subject: l.subject, Header: nats.Header{}}
	msg.Header.Set(HeaderProbe, "1")
	_, err := l.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case err == nil:
		return present
	case errors.Is(err, nats.ErrNoResponders):
		return absent
	case errors.Is(err, context.DeadlineExceeded) && parent.Err() == nil && l.nc.IsConnected():
		return present // delivered to a worker busy with other requests
	}
	return unknown
}

// pingReply is what a worker answers on <prefix>-logic-<kind>'s ping: the
// micro protocol's ping response, of which the node reads the instance id
// and the metadata.
type pingReply struct {
	ID       string            `json:"id"`
	Metadata map[string]string `json:"metadata"`
}

// discover counts the workers that announce themselves (bus.Names.LogicPing)
// and returns the record types they declare: the union of their "types"
// metadata, or nil when one of them declares none (it takes any type).
func (l *logic) discover(ctx context.Context) (workers int, types []string) {
	ctx, cancel := context.WithTimeout(ctx, discoverMax)
	defer cancel()
	inbox := l.nc.NewInbox()
	sub, err := l.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := l.nc.PublishRequest(l.ping, inbox, nil); err != nil {
		return 0, nil
	}
	seen := map[string]bool{}
	declared := map[string]bool{}
	untyped := false
	for len(seen) < maxWorkers {
		quiet := discoverMax
		if len(seen) > 0 {
			quiet = discoverQuiet
		}
		m, err := nextMsg(ctx, sub, quiet)
		if err != nil {
			break
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			break // no responders: nobody announces
		}
		var r pingReply
		if json.Unmarshal(m.Data, &r) != nil || r.ID == "" || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		ts := typesOf(r.Metadata["types"])
		if len(ts) == 0 {
			untyped = true
		}
		for _, t := range ts {
			if len(declared) < actor.MaxTypes {
				declared[t] = true
			}
		}
	}
	if untyped || len(declared) == 0 {
		return len(seen), nil
	}
	for t := range declared {
		types = append(types, t)
	}
	slices.Sort(types)
	return len(seen), types
}

// nextMsg is the next message of sub within d (and ctx).
func nextMsg(ctx context.Context, sub *nats.Subscription, d time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return sub.NextMsgWithContext(ctx)
}

// typesOf reads the "types" metadata of a worker: record types separated by
// commas; invalid ones are left out.
func typesOf(s string) []string {
	var out []string
	for t := range strings.SplitSeq(s, ",") {
		t = strings.TrimSpace(t)
		if records.ValidateType(t) == nil && len(out) < actor.MaxTypes {
			out = append(out, t)
		}
	}
	return out
}

// describe is the kind's actor.Describe: its workers (counted, or probed
// when none announces itself), its episode and who waits.
func (l *logic) describe(ctx context.Context, id string, info *actor.KindInfo) {
	workers, types := l.discover(ctx)
	ri := &actor.RemoteInfo{Subject: l.subject, Workers: workers, Answering: workers > 0}
	if !ri.Answering {
		ri.Answering = l.present(ctx) != absent
	}
	l.health.fill(ri, id, time.Now())
	info.Remote = ri
	if len(info.Types) == 0 {
		info.Types = types
	}
}
