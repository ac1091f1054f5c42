package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Index messages. An index message holds the entries of one index subject
// (a process, an owner, a type, a record id) that one indexer batch wrote,
// in the order of their records: one message per subject and batch instead
// of one per record.
//
// Format 2 (written since the entries were batched): the byte 0x02, then
// entries one after the other, each
//
//	stream (string) seq (uvarint) time (varint, Unix ns) subject id type process owner (strings)
//
// where a string is its length (uvarint) and its bytes. Format 1 (written
// before): one entry per message as a JSON object (see [entry]); it is
// still read, so an index written by an older server needs no rebuild.
const entryFormat2 = 0x02

// maxEntryMsg bounds the body of one index message: an indexer starts a
// new message for the same subject past it. Every value an entry holds is
// bounded (see [bounded]; a subject is a record's subject), so one entry
// is at most a few KiB and a message at most maxEntryMsg plus one entry.
const maxEntryMsg = 64 << 10

// maxEntries bounds the entries of one index message, so that a position
// in an index (see [indexPos]) fits a message's entry in 16 bits.
const maxEntries = 1 << 12

var errEntry = errors.New("not an index message")

// appendEntry appends e in format 2 to b (which starts with entryFormat2).
func appendEntry(b []byte, e entry) []byte {
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(e.Stream)
	b = binary.AppendUvarint(b, e.Seq)
	b = binary.AppendVarint(b, e.Time)
	str(e.Subject)
	str(e.ID)
	str(e.Type)
	str(e.Process)
	str(e.Owner)
	return b
}

// decodeEntries returns the entries of an index message, in either format.
func decodeEntries(b []byte) ([]entry, error) {
	if len(b) > 0 && b[0] == '{' {
		var e entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("%w: %w", errEntry, err)
		}
		return []entry{e}, nil
	}
	if len(b) == 0 || b[0] != entryFormat2 {
		return nil, errEntry
	}
	b = b[1:]
	var out []entry
	for len(b) > 0 {
		var e entry
		var ok bool
		str := func(s *string) {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				ok = false
				return
			}
			*s = string(b[k : k+int(n)])
			b = b[k+int(n):]
		}
		ok = true
		str(&e.Stream)
		if !ok {
			return nil, errEntry
		}
		seq, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errEntry
		}
		b = b[k:]
		ts, k := binary.Varint(b)
		if k <= 0 {
			return nil, errEntry
		}
		b = b[k:]
		e.Seq, e.Time = seq, ts
		for _, s := range []*string{&e.Subject, &e.ID, &e.Type, &e.Process, &e.Owner} {
			if str(s); !ok {
				return nil, errEntry
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// A position in an index stream: the message's sequence and an entry of
// it. Index cursors hold positions (a message holds several entries, and a
// page may end inside one).
//
// Oldest first a position is the last entry consumed: seq<<16 | n where
// n entries of message seq were consumed, n = wholeMsg for all of it.
// Newest first it is an exclusive bound: seq<<16 | n where entries before
// n of message seq are still to read (n = 0: none of it).
//
// A cursor of format 1 held plain message sequences; see [upgradePos].
const wholeMsg = 1<<16 - 1

func indexPos(seq uint64, n int) uint64 { return seq<<16 | uint64(n) }

func splitPos(p uint64) (seq uint64, n int) { return p >> 16, int(p & wholeMsg) }

// upgradePos turns a format-1 cursor's position in an index (a message
// sequence, one entry per message) into a position.
func upgradePos(p uint64, newest bool) uint64 {
	if p <= 1 { // 0: the start; 1 newest first: exhausted
		return p
	}
	if newest {
		return indexPos(p, 0)
	}
	return indexPos(p, wholeMsg)
}

// countEntries is how many entries an index message holds (as
// decodeEntries would return, without building them).
func countEntries(b []byte) int {
	if len(b) > 0 && b[0] == '{' {
		return 1
	}
	if len(b) == 0 || b[0] != entryFormat2 {
		return 0
	}
	b = b[1:]
	n := 0
	for len(b) > 0 {
		// stream, seq, time, then five strings
		for field := range 8 {
			v, k := binary.Uvarint(b)
			if field == 2 {
				_, k = binary.Varint(b)
			}
			if k <= 0 {
				return 0 // corrupt: decodeEntries refuses it whole
			}
			b = b[k:]
			if field != 1 && field != 2 {
				if v > uint64(len(b)) {
					return 0
				}
				b = b[v:]
			}
		}
		n++
	}
	return min(n, maxEntries)
}
