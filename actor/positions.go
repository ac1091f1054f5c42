package actor

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Positions is a position vector: for each stream it names, the sequence
// to resume at in that stream — the sequence of the next record to read,
// one above the last one read. A subscription that reads several streams
// at once ([Client.SubscribeKind] with stream groups, docs/layout.md)
// resumes from one with [FromPositions], without a gap or a duplicate, the
// way a Kafka consumer commits an offset per partition: a sequence means
// something in its own stream only.
//
// Build one from the records read: every record a subscription yields
// carries its stream ([records.Record.Stream]) and sequence
// ([records.Record.Seq]); call [Positions.Seen] with them. Positions are
// "next" positions, as [FromSeq] is (inclusive): after reading sequence
// 120 of EA_OUT_1_OF_3, the vector holds EA_OUT_1_OF_3:121. A stream the
// vector does not name is read from its first record, so a vector that
// lacks a stream never loses what that stream holds; to start a stream at
// its end instead, put its next sequence in the vector
// ([Client.OutboxPositions] gives every outbox stream's).
//
// Its string form (String, [ParsePositions]) is
// "EA_OUT_0_OF_3:121,EA_OUT_2_OF_3:88", to keep it across processes. The
// store's watches take the same type with state buckets for streams and
// revisions for sequences (store.WatchOptions.Positions).
//
// A Positions is a map: the zero value (nil) can be read but not written;
// make one with Positions{}. It is not safe for concurrent writes.
type Positions map[string]uint64

// Seen records that the record at sequence seq of stream was read: the
// stream's position becomes seq+1, unless it is already beyond (a stream's
// records come in order, so it only moves forward).
func (p Positions) Seen(stream string, seq uint64) {
	if p[stream] < seq+1 {
		p[stream] = seq + 1
	}
}

// String returns "<stream>:<next>" for each stream, sorted by stream name
// and separated by commas ("" when empty): the form [ParsePositions] reads.
func (p Positions) String() string {
	var b strings.Builder
	for i, s := range slices.Sorted(maps.Keys(p)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(p[s], 10))
	}
	return b.String()
}

// ParsePositions reads the form [Positions.String] writes:
// "<stream>:<next>" separated by commas, e.g.
// "EA_OUT_0_OF_3:121,EA_OUT_2_OF_3:88". The empty string is an empty
// vector (every stream from its first record). Errors wrap [ErrInvalid]
// and name the entry at fault; which streams are valid is checked where
// the vector is used (by [FromPositions]'s subscription).
func ParsePositions(s string) (Positions, error) {
	p := Positions{}
	if s == "" {
		return p, nil
	}
	for entry := range strings.SplitSeq(s, ",") {
		i := strings.LastIndexByte(entry, ':')
		if i <= 0 {
			return nil, invalidf("positions %q: entry %q is not <stream>:<next sequence>", s, entry)
		}
		stream, num := entry[:i], entry[i+1:]
		seq, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return nil, invalidf("positions %q: entry %q: the position %q is not a sequence (an unsigned integer)", s, entry, num)
		}
		if _, dup := p[stream]; dup {
			return nil, invalidf("positions %q: stream %s appears twice", s, stream)
		}
		if seq == 0 {
			return nil, invalidf("positions %q: entry %q: positions start at 1 (the next sequence to read: the last one read + 1)", s, entry)
		}
		p[stream] = seq
	}
	return p, nil
}

// Check returns an error wrapping [ErrInvalid] unless every stream (or
// bucket) p names is one of streams (those of the deployment the vector is
// used with) and every position is at least 1. The error names the first
// entry at fault and lists streams.
func (p Positions) Check(streams []string) error {
	for _, s := range slices.Sorted(maps.Keys(p)) {
		if !slices.Contains(streams, s) {
			return invalidf("position of %q: not one of this deployment's (%s); a vector is valid only with the deployment and stream group count it was read from", s, strings.Join(streams, ", "))
		}
		if p[s] == 0 {
			return invalidf("position of %s is 0: positions start at 1 (the next sequence or revision to read: the last one read + 1)", s)
		}
	}
	return nil
}

// At is where a subscription from p starts stream: at its position, or at
// its first record (1) when p does not name it.
func (p Positions) At(stream string) uint64 {
	if seq, ok := p[stream]; ok {
		return seq
	}
	return 1
}

// clone copies p, never nil: a subscription keeps its own copy.
func (p Positions) clone() Positions {
	out := make(Positions, len(p))
	maps.Copy(out, p)
	return out
}

var _ fmt.Stringer = Positions(nil)
