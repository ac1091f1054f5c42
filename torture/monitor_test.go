//go:build unix

package torture

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// monitor follows, while the run lasts, how far each counter has applied its
// mailbox (the seq of its state document, from a watch of the state bucket)
// against how far the publisher knows it stored (acknowledged sequences),
// every 50 ms. From that it keeps:
//   - stalls: intervals in which a counter had records waiting and applied
//     nothing (kept when longer than half a second);
//   - recoveries: from a given moment, how long until every record stored
//     by then was applied.
//
// A counter that looks stalled is also read directly (readStalled), so that
// a watch gone quiet with a server is not taken for the counter's stall.
type monitor struct {
	kvs []jetstream.KeyValue // the state buckets (one per stream group)
	pub *publisher

	mu         sync.Mutex
	applied    map[string]uint64                // counter -> seq of its state document
	lastUpdate time.Time                        // of the watch
	waiting    map[string]*stall                // counter -> the stall going on
	stalls     []stall                          // ended, longer than minStall
	recoveries []*recovery                      // not yet recovered
	rewatch    []chan struct{}                  // ask the watch loops to watch again, one per bucket
	logf       func(format string, args ...any) // if set, says when watches open
	stopping   sync.WaitGroup                   // watches being stopped

	done chan struct{} // closed when both loops have returned
}

// stall is an interval in which a counter had records waiting and applied
// none.
type stall struct {
	counter       string
	from, to      time.Time
	applied, want uint64 // its seq then, and the last record waiting at the start
}

// recovery measures from at until every record stored by then is applied.
type recovery struct {
	at     time.Time
	target map[string]uint64
	done   chan struct{} // closed when recovered
	took   time.Duration // set before done is closed
}

const minStall = 500 * time.Millisecond

// startMonitor starts following the state bucket; the monitor stops when
// ctx ends (wait for it with <-m.done).
func startMonitor(ctx context.Context, kvs []jetstream.KeyValue, pub *publisher) *monitor {
	m := &monitor{kvs: kvs, pub: pub, applied: map[string]uint64{}, waiting: map[string]*stall{},
		done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2 + len(kvs))
	for _, kv := range kvs {
		rewatch := make(chan struct{}, 1)
		m.rewatch = append(m.rewatch, rewatch)
		go func() { defer wg.Done(); m.watchLoop(ctx, kv, rewatch) }()
	}
	go func() { defer wg.Done(); m.sampleLoop(ctx) }()
	go func() { defer wg.Done(); m.readStalled(ctx) }()
	go func() { wg.Wait(); m.stopping.Wait(); close(m.done) }()
	return m
}

// watchAgain makes the monitor open a new watch of the state bucket (after a
// server restart, rather than wait for the old one to notice).
func (m *monitor) watchAgain() {
	for _, ch := range m.rewatch {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watchLoop keeps a watch on the counters' state documents, opening a new
// one when it ends or when asked to. A watch being replaced is followed
// until the new one has read its initial values: a watch whose consumer
// lived on a server that went sees nothing until nats.go notices, and the
// new one may take seconds to open right after an election (its request
// lost), so switching at once could leave the monitor blind meanwhile and
// count the counters as stalled though they applied (updates are merged:
// the highest seq seen wins).
func (m *monitor) watchLoop(ctx context.Context, kv jetstream.KeyValue, rewatch <-chan struct{}) {
	retire := func() {} // stops following the watch being replaced
	for ctx.Err() == nil {
		asked := time.Now()
		w, err := kv.Watch(ctx, "counter.>", jetstream.IgnoreDeletes())
		if m.logf != nil {
			m.logf("monitor: watch of %s opened after %s: %v", kv.Bucket(), time.Since(asked).Round(time.Millisecond), err)
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		current, ended, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
		m.stopping.Add(2)
		go func() {
			defer m.stopping.Done()
			m.follow(ctx, w, stop, current)
			close(ended)
			// Stopping a watch deletes its consumer, which waits out the
			// API timeout when the server that held it is gone: nothing
			// waits for it.
			_ = w.Stop()
		}()
		old := retire
		go func() {
			defer m.stopping.Done()
			select {
			case <-current:
			case <-ended:
			case <-ctx.Done():
			}
			old()
		}()
		var once sync.Once
		retire = func() { once.Do(func() { close(stop) }) }
		select {
		case <-ctx.Done():
			return
		case <-rewatch:
		case <-ended:
		}
	}
}

// follow reads w's updates until it ends, ctx ends or stop is closed;
// current is closed once its initial values are read.
func (m *monitor) follow(ctx context.Context, w jetstream.KeyWatcher, stop <-chan struct{}, current chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				if m.logf != nil {
					m.logf("monitor: initial values read")
				}
				if current != nil {
					close(current)
					current = nil
				}
				continue // the end of the initial values
			}
			var doc struct {
				Seq uint64 `msgpack:"seq"`
			}
			if msgpack.Unmarshal(e.Value(), &doc) != nil {
				continue // the checker reads every document at the end
			}
			c := strings.TrimPrefix(e.Key(), "counter.")
			m.mu.Lock()
			m.applied[c] = max(m.applied[c], doc.Seq)
			m.lastUpdate = time.Now()
			m.mu.Unlock()
		}
	}
}

// readStalled reads, every 200 ms, the state documents of the counters that
// have looked stalled for over 300 ms (at most 64 at a time) with a direct
// get, which any replica answers: a watch whose consumer lived on a server
// that went sees nothing until nats.go notices (seconds), and its silence
// must not count as the counters' stall. A document read newer than the
// watch's is taken like a watch update.
func (m *monitor) readStalled(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	bucket := map[string]int{} // counter -> index in m.kvs, once found
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		var stalled []string
		for c, s := range m.waiting {
			if time.Since(s.from) > 300*time.Millisecond && len(stalled) < 32 {
				stalled = append(stalled, c)
			}
		}
		m.mu.Unlock()
		for _, c := range stalled {
			order := make([]int, 0, len(m.kvs))
			if i, ok := bucket[c]; ok {
				order = append(order, i)
			} else {
				for i := range m.kvs {
					order = append(order, i)
				}
			}
			for _, i := range order {
				gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				e, err := m.kvs[i].Get(gctx, "counter."+c)
				cancel()
				if err != nil {
					continue // not in this group's bucket, or no answer
				}
				bucket[c] = i
				var doc struct {
					Seq uint64 `msgpack:"seq"`
				}
				if msgpack.Unmarshal(e.Value(), &doc) == nil {
					m.mu.Lock()
					m.applied[c] = max(m.applied[c], doc.Seq)
					m.mu.Unlock()
				}
				break
			}
		}
	}
}

func (m *monitor) sampleLoop(ctx context.Context) {
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			m.sample(time.Now(), true)
			return
		case <-ticker.C:
			m.sample(time.Now(), false)
		}
	}
}

// sample compares applied with stored for every counter; final ends every
// stall going on.
func (m *monitor) sample(now time.Time, final bool) {
	stored := m.pub.storedNow()
	m.mu.Lock()
	defer m.mu.Unlock()
	for c, want := range stored {
		got := m.applied[c]
		s := m.waiting[c]
		if s != nil && (got != s.applied || final) { // progress: the stall ends
			s.to = now
			if s.to.Sub(s.from) >= minStall {
				m.stalls = append(m.stalls, *s)
			}
			delete(m.waiting, c)
			s = nil
		}
		if s == nil && want > got && !final {
			m.waiting[c] = &stall{counter: c, from: now, applied: got, want: want}
		}
	}
	kept := m.recoveries[:0]
	for _, r := range m.recoveries {
		if m.caughtUp(r.target) {
			r.took = now.Sub(r.at)
			close(r.done)
			continue
		}
		kept = append(kept, r)
	}
	m.recoveries = kept
}

func (m *monitor) caughtUp(target map[string]uint64) bool {
	for c, want := range target {
		if m.applied[c] < want {
			return false
		}
	}
	return true
}

// recoverFrom starts measuring a recovery from now: until every record
// stored by now is applied.
func (m *monitor) recoverFrom() *recovery {
	r := &recovery{at: time.Now(), target: m.pub.storedNow(), done: make(chan struct{})}
	m.mu.Lock()
	m.recoveries = append(m.recoveries, r)
	m.mu.Unlock()
	return r
}

// behind describes the counters that have not applied what r waits for
// (at most 10).
func (m *monitor) behind(r *recovery) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for c, want := range r.target {
		if got := m.applied[c]; got < want {
			out = append(out, fmt.Sprintf("counter/%s applied up to seq %d, waiting for %d", c, got, want))
		}
	}
	slices.Sort(out)
	n := len(out)
	if n > 10 {
		out = out[:10]
	}
	// What the bucket says now, read directly (not through the watch).
	for i, line := range out {
		c := strings.TrimPrefix(strings.Fields(line)[0], "counter/")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		d, err := readStateAny(ctx, m.kvs, "counter."+c)
		cancel()
		if err != nil {
			out[i] += fmt.Sprintf(" (read directly: %v)", err)
		} else {
			out[i] += fmt.Sprintf(" (read directly: seq %d, status %s)", d.Seq, d.Status)
		}
	}
	return fmt.Sprintf("%d counters behind: %s", n, strings.Join(out, "; "))
}

// allStalls returns the stalls kept (the monitor must have stopped).
func (m *monitor) allStalls() []stall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.stalls)
}
