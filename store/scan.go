package store

import (
	"context"
	"encoding/json"
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
	if s.index {
		if json.Unmarshal(m.data, &it.e) != nil {
			return it, false
		}
		it.time = time.Unix(0, it.e.Time)
		it.msg = stored{}
	}
	return it, s.keep(it)
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
