package records

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

// crockford is Crockford's base32 alphabet. Its characters are in
// ascending ASCII order, so ids compare as the numbers they encode.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// IDLen is the length of an id made by [NewID].
const IDLen = 26

// NewID returns a new record id: 26 characters of Crockford base32 (0-9
// and upper-case letters without I L O U) encoding 128 bits, the current
// Unix time in nanoseconds as a 64-bit big-endian number followed by 64
// random bits from crypto/rand.
//
// Ids therefore sort by creation time: an id made at a later nanosecond
// (by the wall clock, which can step backwards) compares greater as a
// string. Ids made in the same nanosecond are ordered at random, and two
// of them collide only if 64 random bits do.
func NewID() string { return newID(time.Now()) }

func newID(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	_, _ = rand.Read(b[8:]) // never fails: crypto/rand crashes the program rather than return an error
	return encodeID(b)
}

// encodeID writes the 128 bits of b as 26 base32 digits, most significant
// first; the first digit holds the top 3 bits.
func encodeID(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [IDLen]byte
	for i := IDLen - 1; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
