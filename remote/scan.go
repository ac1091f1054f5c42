package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxDepth bounds the nesting of a msgpack reply (JSON replies are bounded
// by encoding/json's own limit).
const maxDepth = 1000

// checkMsgpack reports whether b is exactly one well-formed msgpack value
// nested at most max levels deep. It walks b once without recursion, so a
// hostile reply costs at most one pass over its bytes before it is refused.
func checkMsgpack(b []byte, max int) error {
	// pending[i] is how many values level i still expects.
	pending := []uint64{1}
	i := 0
	need := func(n uint64) error {
		if uint64(len(b)-i) < n {
			return errors.New("truncated")
		}
		return nil
	}
	size := func(w int) (uint64, error) {
		if err := need(uint64(w)); err != nil {
			return 0, err
		}
		var n uint64
		switch w {
		case 1:
			n = uint64(b[i])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += w
		return n, nil
	}
	for len(pending) > 0 {
		if pending[len(pending)-1] == 0 {
			pending = pending[:len(pending)-1]
			continue
		}
		pending[len(pending)-1]--
		if i >= len(b) {
			return errors.New("truncated")
		}
		c := b[i]
		i++
		var skip, children uint64
		var err error
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			children = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			children = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			skip = uint64(c & 0x1f)
		case c == 0xc4, c == 0xd9:
			skip, err = size(1)
		case c == 0xc5, c == 0xda:
			skip, err = size(2)
		case c == 0xc6, c == 0xdb:
			skip, err = size(4)
		case c == 0xc7, c == 0xc8, c == 0xc9:
			skip, err = size(1 << (c - 0xc7))
			skip++ // the ext type
		case c == 0xca, c == 0xce, c == 0xd2:
			skip = 4
		case c == 0xcb, c == 0xcf, c == 0xd3:
			skip = 8
		case c == 0xcc, c == 0xd0:
			skip = 1
		case c == 0xcd, c == 0xd1:
			skip = 2
		case c >= 0xd4 && c <= 0xd8:
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc:
			children, err = size(2)
		case c == 0xdd:
			children, err = size(4)
		case c == 0xde:
			children, err = size(2)
			children *= 2
		case c == 0xdf:
			children, err = size(4)
			children *= 2
		default:
			return fmt.Errorf("byte 0x%02x at %d is not a msgpack type", c, i-1)
		}
		if err == nil {
			err = need(skip)
		}
		if err != nil {
			return err
		}
		i += int(skip)
		if children > 0 {
			if len(pending) >= max {
				return fmt.Errorf("nested deeper than %d levels", max)
			}
			if children > uint64(len(b)-i) { // each takes a byte at least
				return errors.New("truncated")
			}
			pending = append(pending, children)
		}
	}
	if i != len(b) {
		return fmt.Errorf("%d bytes after the value", len(b)-i)
	}
	return nil
}
