package store

import (
	"context"
	"slices"
	"time"
)

// source is one stream and subject filter a query reads, with the
// predicate its items must pass.
type source struct {
	stream string
	filter string
	index  bool // the messages are index entries (else records)
	keep   func(item) bool
}

// item is a message a source yielded: a record, or an index entry pointing
// at one.
type item struct {
	src  int
	seq  uint64 // sequence in the source's stream
	time time.Time
	msg  stored // the record, for record sources
	e    entry  // the entry, for index sources
}

// scanResult is what scanning one source gave.
type scanResult struct {
	items []item // matches, in scan order
	// edge is how far the scan got: oldest first the last sequence examined,
	// newest first the lowest sequence examined (exclusive bound for the
	// next page).
	edge uint64
	done bool // the scan reached the end of what can match
}

func (c *Client) toItem(src int, s source, m stored) (item, bool) {
	it := item{src: src, seq: m.seq, time: m.time, msg: m}
	return it, s.keep(it)
}

// indexItems turns an index message into items, one per entry (at most
// maxEntries: the indexer writes no more in one message), each with its
// position (see indexPos; newest first the bound below it, else the
// position that consumes it).
func indexItems(src int, m stored, newest bool) []item {
	es, err := decodeEntries(m.data)
	if err != nil {
		return nil
	}
	es = es[:min(len(es), maxEntries)]
	out := make([]item, len(es))
	for i, e := range es {
		n := i + 1
		if newest {
			n = i
		}
		out[i] = item{src: src, seq: indexPos(m.seq, n), time: time.Unix(0, e.Time), e: e}
	}
	return out
}

// indexBatchBytes bounds what one read of index messages answers.
const indexBatchBytes = 1 << 20

// forwardIndex is forward for an index source: positions are entries of
// index messages (see indexPos), and budget counts entries.
func (c *Client) forwardIndex(ctx context.Context, src int, s source, pos uint64, limit, budget int) (scanResult, error) {
	res := scanResult{edge: pos}
	seq, skip := splitPos(pos)
	from := seq
	if skip == wholeMsg || seq == 0 {
		from, skip = seq+1, 0
	}
	examined := 0
	for len(res.items) < limit && examined < budget {
		n := min(max(limit-len(res.items), 16), 1000)
		got, pending, err := c.direct.batchMax(ctx, s.stream, s.filter, from, nil, n, indexBatchBytes)
		if err != nil {
			return res, err
		}
		for _, m := range got {
			for i, it := range indexItems(src, m, false) {
				if m.seq == seq && i < skip {
					continue
				}
				examined++
				res.edge = it.seq
				if s.keep(it) {
					res.items = append(res.items, it)
				}
				if len(res.items) == limit || examined >= budget {
					return res, nil
				}
			}
			res.edge = indexPos(m.seq, wholeMsg)
			from = m.seq + 1
		}
		if len(got) == 0 || pending == 0 {
			res.done = true
			return res, nil
		}
	}
	return res, nil
}

// backwardIndex is backward for an index source: hi is a position (see
// indexPos; 0: from the end), and budget counts entries.
func (c *Client) backwardIndex(ctx context.Context, src int, s source, hi uint64, limit, budget int) (scanResult, error) {
	st, err := c.conn.JetStream().Stream(ctx, s.stream)
	if err != nil {
		return scanResult{}, unavailable(s.stream, err)
	}
	state := st.CachedInfo().State
	first := max(state.FirstSeq, 1)
	hiSeq, hiN := splitPos(hi)
	if hi == 0 || hiSeq > state.LastSeq+1 {
		hiSeq, hiN = state.LastSeq+1, 0
	}
	res := scanResult{edge: indexPos(hiSeq, 0)}
	examined := 0
	if hiN > 0 { // the page before ended inside message hiSeq: the rest of it first
		got, _, err := c.direct.batchMax(ctx, s.stream, s.filter, hiSeq, nil, 1, indexBatchBytes)
		if err != nil {
			return res, err
		}
		if len(got) == 1 && got[0].seq == hiSeq {
			its := indexItems(src, got[0], true)
			its = its[:min(hiN, len(its))]
			slices.Reverse(its)
			for _, it := range its {
				examined++
				if s.keep(it) {
					res.items = append(res.items, it)
				}
			}
		}
	}
	window := uint64(max(limit, 16))
	for hiSeq > first && len(res.items) < limit && examined < budget {
		lo := first
		if hiSeq-first > window {
			lo = hiSeq - window
		}
		var chunk []item
		inWindow := 0
		for from := lo; from < hiSeq; {
			got, pending, err := c.direct.batchMax(ctx, s.stream, s.filter, from, nil, min(1000, int(min(hiSeq-from, 1000))), indexBatchBytes)
			if err != nil {
				return res, err
			}
			last := uint64(0)
			for _, m := range got {
				if m.seq >= hiSeq {
					break
				}
				last = m.seq
				for _, it := range indexItems(src, m, true) {
					inWindow++
					if s.keep(it) {
						chunk = append(chunk, it)
					}
				}
			}
			if len(got) == 0 || pending == 0 || last == 0 || last+1 >= hiSeq {
				break
			}
			from = last + 1
		}
		examined += inWindow
		slices.Reverse(chunk)
		res.items = append(res.items, chunk...)
		hiSeq = lo
		res.edge = indexPos(lo, 0)
		// Grow the window, but not past what the budget can examine at the
		// density this window had.
		next := window * 4
		if inWindow > 0 {
			room := uint64(max(budget-examined, limit)) * window / uint64(inWindow)
			next = max(min(next, room), window)
		}
		window = next
	}
	res.done = hiSeq <= first
	return res, nil
}

// forward scans s after sequence pos for up to limit matches, examining at
// most budget messages. since starts a record source at a time when pos is
// 0; until ends it.
func (c *Client) forward(ctx context.Context, src int, s source, pos uint64, limit, budget int, since, until time.Time) (scanResult, error) {
	res := scanResult{edge: pos}
	from := pos + 1
	var start *time.Time
	if pos == 0 && !since.IsZero() && !s.index {
		start = &since
		from = 0
	}
	examined := 0
	for len(res.items) < limit && examined < budget {
		n := min(max(2*min(limit-len(res.items), 500), 16), 1000, budget-examined)
		got, pending, err := c.direct.batch(ctx, s.stream, s.filter, from, start, n)
		if err != nil {
			return res, err
		}
		start = nil
		for _, m := range got {
			if !s.index && !until.IsZero() && m.time.After(until) {
				res.done = true
				return res, nil
			}
			examined++
			res.edge = m.seq
			if it, ok := c.toItem(src, s, m); ok {
				res.items = append(res.items, it)
				if len(res.items) == limit {
					break
				}
			}
		}
		switch {
		case len(res.items) == limit:
			return res, nil
		case len(got) == 0 || pending == 0:
			res.done = true
			return res, nil
		}
		from = res.edge + 1
	}
	return res, nil
}

// backward scans s below sequence hi (0: from the end of the stream) for
// up to limit matches, newest first, in windows of sequences that grow
// until enough match: every window is read whole, so what lies between the
// returned edge and hi has been examined.
func (c *Client) backward(ctx context.Context, src int, s source, hi uint64, limit, budget int, since time.Time) (scanResult, error) {
	st, err := c.conn.JetStream().Stream(ctx, s.stream)
	if err != nil {
		return scanResult{}, unavailable(s.stream, err)
	}
	state := st.CachedInfo().State
	first := max(state.FirstSeq, 1)
	if hi == 0 || hi > state.LastSeq+1 {
		hi = state.LastSeq + 1
	}
	res := scanResult{edge: hi}
	window := uint64(4 * limit)
	examined := 0
	for res.edge > first && len(res.items) < limit && examined < budget {
		lo := first
		if res.edge-first > window {
			lo = res.edge - window
		}
		var chunk []item
		inWindow := 0
		stopAtSince := false
		for from := lo; from < res.edge; {
			got, pending, err := c.direct.batch(ctx, s.stream, s.filter, from, nil, min(1000, int(min(res.edge-from, 1000))))
			if err != nil {
				return res, err
			}
			last := uint64(0)
			for _, m := range got {
				if m.seq >= res.edge {
					break
				}
				last = m.seq
				inWindow++
				if !s.index && !since.IsZero() && m.time.Before(since) {
					stopAtSince = true
					continue
				}
				if it, ok := c.toItem(src, s, m); ok {
					chunk = append(chunk, it)
				}
			}
			if len(got) == 0 || pending == 0 || last == 0 || last+1 >= res.edge {
				break
			}
			from = last + 1
		}
		examined += inWindow
		slices.Reverse(chunk)
		res.items = append(res.items, chunk...)
		res.edge = lo
		if stopAtSince {
			res.done = true
			return res, nil
		}
		// Grow the window, but not past what the budget can examine at the
		// density this window had.
		next := window * 4
		if inWindow > 0 {
			room := uint64(max(budget-examined, limit)) * window / uint64(inWindow)
			next = max(min(next, room), window)
		}
		window = next
	}
	res.done = res.edge <= first
	return res, nil
}
