package actor

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// Loading state documents in batches.
//
// An effector reads its state document when its first record arrives (see
// effector.load), one KV get each. After a failover every effector of the
// partitions taken over does so at once: 33,000 gets, one round trip each.
// A JetStream direct get with multi_last returns the last message of up to
// 1,024 subjects in one request; measured on one embedded server, batches
// of 256 keys, 4 in flight, read keys 2.7× faster than 256 concurrent gets
// (BENCHMARKS.md, "State loading").
//
// So loads are grouped: a load while fewer than loadLeaders loads are in
// flight is one KV get, as before (nothing waits: a single activation, or a
// few dozen, cost what they did); a load beyond that waits in a queue, and the next load to
// finish takes up to loadBatch queued keys with it in one direct get. No
// goroutine of its own: the caller of a load in flight does the batch's
// work and hands the queue on to a waiting caller when it is done.
//
// A batch that fails (a timeout, a server that does not know multi_last)
// leaves each of its callers to read its key alone. What a batch returns is
// checked as a KV get's answer is (a document that does not decode, or names
// another effector, is a *CorruptStateError; a delete marker is not found).

const (
	// loadLeaders is how many loads (single or batched) may be in flight.
	// Fewer would make a few dozen loads at once (a small failover) wait
	// for each other's round trips, where one get each in parallel took
	// one round trip; batches matter for thousands.
	loadLeaders = 32
	loadBatch   = 256 // keys per batched direct get
)

// stateLoader groups the state loads of a node; see above.
type stateLoader struct {
	n *Node

	mu      sync.Mutex // guards the fields below
	leaders int        // loads in flight
	queue   []*loadWait

	batched atomic.Int64 // documents read in batches so far
}

// loadWait is a load waiting in the queue; its answer comes on ch.
type loadWait struct {
	ref records.Ref
	ch  chan loadAnswer // buffered: the answer never blocks its sender
}

// loadAnswer is the outcome of a queued load: an entry or an error, or
// lead (the caller is to take the next batch), or alone (the batch failed:
// the caller reads its key itself).
type loadAnswer struct {
	ent   kv.Entry[Document]
	err   error
	lead  bool
	alone bool
}

// loadState reads r's state document, as states.Get does, in a batch with
// others when many are read at once (see above).
func (n *Node) loadState(ctx context.Context, r records.Ref) (kv.Entry[Document], error) {
	if p := n.place.Load(); p != nil {
		return p.loads.get(ctx, r)
	}
	return n.states.Get(ctx, n.names.StateKey(r))
}

func (l *stateLoader) get(ctx context.Context, r records.Ref) (kv.Entry[Document], error) {
	w := &loadWait{ref: r, ch: make(chan loadAnswer, 1)}
	l.mu.Lock()
	if l.leaders < loadLeaders {
		l.leaders++
		l.mu.Unlock()
		return l.lead(ctx, w)
	}
	l.queue = append(l.queue, w)
	l.mu.Unlock()
	var a loadAnswer
	select {
	case a = <-w.ch:
	case <-ctx.Done():
		l.mu.Lock()
		for i, q := range l.queue {
			if q == w {
				l.queue = append(l.queue[:i], l.queue[i+1:]...)
				l.mu.Unlock()
				return kv.Entry[Document]{}, ctx.Err()
			}
		}
		l.mu.Unlock()
		a = <-w.ch // taken by a batch or asked to lead: the answer is on its way
		if a.lead {
			l.handOn()
		}
		return kv.Entry[Document]{}, ctx.Err()
	}
	switch {
	case a.lead:
		return l.lead(ctx, w)
	case a.alone:
		return l.n.states.Get(ctx, l.n.names.StateKey(r))
	}
	return a.ent, a.err
}

// lead does the work of a load in flight: w's key with up to loadBatch-1
// queued ones, then hands the queue on.
func (l *stateLoader) lead(ctx context.Context, w *loadWait) (kv.Entry[Document], error) {
	l.mu.Lock()
	var batch []*loadWait
	if l.n.names.Groups() == 1 {
		k := min(len(l.queue), loadBatch-1)
		batch = append([]*loadWait{w}, l.queue[:k]...)
		l.queue = l.queue[k:]
	} else {
		batch = l.sameGroup(w)
	}
	l.mu.Unlock()
	defer l.handOn()
	if len(batch) == 1 {
		return l.n.states.Get(ctx, l.n.names.StateKey(w.ref))
	}
	// The batch serves other callers too: it must not end with this
	// caller's context alone.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	answers, err := l.fetch(bctx, batch)
	if err != nil {
		l.n.log.Debug("batched state load failed: loading one by one", "keys", len(batch), "err", err)
		for _, q := range batch[1:] {
			q.ch <- loadAnswer{alone: true}
		}
		return l.n.states.Get(ctx, l.n.names.StateKey(w.ref))
	}
	l.batched.Add(int64(len(batch)))
	for i, q := range batch[1:] {
		q.ch <- answers[i+1]
	}
	return answers[0].ent, answers[0].err
}

// sameGroup takes from the queue up to loadBatch-1 loads of w's stream
// group (one direct get reads one bucket's stream) and returns them after w.
// l.mu is held.
func (l *stateLoader) sameGroup(w *loadWait) []*loadWait {
	g := l.n.names.GroupOf(w.ref)
	batch := []*loadWait{w}
	rest := make([]*loadWait, 0, len(l.queue))
	for _, q := range l.queue {
		if len(batch) < loadBatch && l.n.names.GroupOf(q.ref) == g {
			batch = append(batch, q)
		} else {
			rest = append(rest, q)
		}
	}
	l.queue = rest
	return batch
}

// handOn passes the lead to the first queued load, or ends a load in flight
// when none waits.
func (l *stateLoader) handOn() {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.leaders--
		l.mu.Unlock()
		return
	}
	next := l.queue[0]
	l.queue = l.queue[1:]
	l.mu.Unlock()
	next.ch <- loadAnswer{lead: true}
}

// multiLastReq is a direct get of the last message of each of the subjects
// (nats-server 2.11+).
type multiLastReq struct {
	MultiLast []string `json:"multi_last"`
	Batch     int      `json:"batch"`
}

// fetch reads the state documents of batch (all of one stream group) with
// one direct get, and returns an answer for each, in order: an error is for
// the whole batch.
func (l *stateLoader) fetch(ctx context.Context, batch []*loadWait) ([]loadAnswer, error) {
	names := l.n.names
	at := make(map[string]int, len(batch))
	req := multiLastReq{MultiLast: make([]string, 0, len(batch)), Batch: len(batch)}
	for i, q := range batch {
		s := names.StateSubject(q.ref)
		if _, dup := at[s]; dup {
			return nil, fmt.Errorf("key %s twice in one batch", names.StateKey(q.ref))
		}
		at[s] = i
		req.MultiLast = append(req.MultiLast, s)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	nc := l.n.conn.NATS()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.PublishRequest(names.DirectGet(names.StateStreamFor(batch[0].ref)), inbox, body); err != nil {
		return nil, err
	}
	answers := make([]loadAnswer, len(batch))
	found := make([]bool, len(batch))
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("batched direct get of %d state documents: %w", len(batch), err)
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "204", "404": // end of the batch; 404: none of the keys exists
			for i, q := range batch {
				if !found[i] {
					answers[i].err = fmt.Errorf("kv %s: get %q: %w", names.StateBucketFor(q.ref), names.StateKey(q.ref), kv.ErrNotFound)
				}
			}
			return answers, nil
		default:
			return nil, fmt.Errorf("batched direct get of %d state documents: status %s %s", len(batch), status, msg.Header.Get("Description"))
		}
		i, ok := at[msg.Header.Get("Nats-Subject")]
		if !ok {
			return nil, fmt.Errorf("batched direct get: an answer for subject %q, which was not asked", msg.Header.Get("Nats-Subject"))
		}
		found[i] = true
		answers[i].ent, answers[i].err = l.entry(batch[i].ref, msg)
	}
}

// entry makes the state entry of r out of a direct get's answer, as
// states.Get would return it.
func (l *stateLoader) entry(r records.Ref, msg *nats.Msg) (kv.Entry[Document], error) {
	key := l.n.names.StateKey(r)
	rev, err := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return kv.Entry[Document]{}, fmt.Errorf("state %s: direct get answer without a sequence: %w", key, err)
	}
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return kv.Entry[Document]{}, fmt.Errorf("kv %s: get %q: %w", l.n.names.StateBucketFor(r), key, kv.ErrNotFound)
	}
	ent := kv.Entry[Document]{Key: key, Revision: rev}
	ent.Created, _ = time.Parse(time.RFC3339Nano, msg.Header.Get("Nats-Time-Stamp"))
	if err := codec.Unmarshal(msg.Data, &ent.Value); err != nil {
		return kv.Entry[Document]{}, &CorruptStateError{Key: key, Revision: rev, Err: fmt.Errorf("does not decode as a state document: %w", err)}
	}
	if err := l.n.states.checkRead(key, rev, ent.Value); err != nil {
		return kv.Entry[Document]{}, err
	}
	return ent, nil
}
