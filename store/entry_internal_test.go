package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Entries survive the trip through format 2, several to a message; a
// format-1 body (JSON) is read as one entry; every cut of a valid body and
// any other byte string is refused whole, without a panic, and
// countEntries agrees with decodeEntries.
func TestEntryFormat(t *testing.T) {
	t.Parallel()
	es := []entry{
		{Stream: "EA_MBOX", Seq: 1, Subject: "ea.mbox.3.w.1", ID: "r1", Type: "message", Time: 1},
		{Stream: "EA_OUT", Seq: 1 << 40, Subject: "ea.out.w.1", ID: bounded(strings.Repeat("x", 5000)), Type: "t", Process: "p", Owner: "o", Time: -5},
		{Stream: "EA_OUT", Seq: 7, Subject: "ea.out.w.2", ID: "é~ ", Type: "t.u", Process: strings.Repeat("p", 256), Time: 1 << 62},
	}
	body := []byte{entryFormat2}
	for _, e := range es {
		body = appendEntry(body, e)
	}
	got, err := decodeEntries(body)
	if err != nil || len(got) != len(es) {
		t.Fatalf("decode: %d entries, %v", len(got), err)
	}
	for i := range es {
		if got[i] != es[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], es[i])
		}
	}
	if n := countEntries(body); n != len(es) {
		t.Errorf("countEntries %d, want %d", n, len(es))
	}
	if len(got[1].ID) > maxValue {
		t.Errorf("an id of %d bytes in an entry", len(got[1].ID))
	}
	for cut := 1; cut < len(body); cut++ {
		part := body[:cut]
		got, err := decodeEntries(part)
		complete := cut == 1 || bytes.Equal(part, body[:len(part)]) && isBoundary(body, cut)
		if complete {
			if err != nil {
				t.Errorf("cut at an entry boundary %d: %v", cut, err)
			}
			continue
		}
		if !errors.Is(err, errEntry) || got != nil {
			t.Fatalf("cut at %d: %d entries, %v; want errEntry", cut, len(got), err)
		}
		if n := countEntries(part); n != 0 {
			t.Fatalf("cut at %d: countEntries %d, want 0", cut, n)
		}
	}
	old, _ := json.Marshal(es[0])
	if got, err := decodeEntries(old); err != nil || len(got) != 1 || got[0] != es[0] || countEntries(old) != 1 {
		t.Errorf("format 1: %+v, %v", got, err)
	}
	for _, junk := range [][]byte{nil, {}, {0x03, 1}, []byte("{not json"), {entryFormat2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if got, err := decodeEntries(junk); err == nil || got != nil {
			t.Errorf("%q: %d entries, %v; want an error", junk, len(got), err)
		}
	}
}

// isBoundary reports whether cut ends an entry of body.
func isBoundary(body []byte, cut int) bool {
	b := []byte{entryFormat2}
	es, _ := decodeEntries(body)
	for _, e := range es {
		b = appendEntry(b, e)
		if len(b) == cut {
			return true
		}
	}
	return false
}

// A position names an entry of an index message; one from a format-1
// cursor (a message sequence) consumes the whole message oldest first and
// bounds below it newest first.
func TestIndexPositions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		seq uint64
		n   int
	}{{1, 0}, {1, 1}, {5, wholeMsg}, {1 << 47, maxEntries}} {
		if s, n := splitPos(indexPos(c.seq, c.n)); s != c.seq || n != c.n {
			t.Errorf("position of %d/%d comes back as %d/%d", c.seq, c.n, s, n)
		}
	}
	if p := upgradePos(9, false); p != indexPos(9, wholeMsg) {
		t.Errorf("oldest first: %x", p)
	}
	if p := upgradePos(9, true); p != indexPos(9, 0) {
		t.Errorf("newest first: %x", p)
	}
	if upgradePos(0, false) != 0 || upgradePos(1, true) != 1 {
		t.Error("the start and the exhausted mark must stay as they are")
	}
}
