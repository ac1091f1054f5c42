package records

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxDepth is how deeply arrays and maps may nest in a msgpack payload.
// It is the limit encoding/json applies to JSON, and it keeps decoding,
// which recurses once per level, from exhausting the stack.
const MaxDepth = 10000

// checkPayload reports whether data is well formed for contentType, which
// is [ContentMsgpack] or [ContentJSON]. An empty payload is well formed.
// The error is a [*PayloadError].
func checkPayload(contentType string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var err error
	if contentType == ContentJSON {
		err = checkJSON(data)
	} else {
		err = checkMsgpack(data)
	}
	if err != nil {
		return &PayloadError{ContentType: contentType, Err: err}
	}
	return nil
}

// checkJSON reports whether data is one JSON value.
func checkJSON(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	// Slow path, on failure only: let the decoder say what is wrong.
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	return errors.New("not valid JSON")
}

// checkMsgpack reports whether data is exactly one complete msgpack value,
// with no trailing bytes, nested at most [MaxDepth] deep. It accepts what
// msgpack.Decoder.Skip accepts, without recursion and without allocating
// for shallow values: declared lengths are checked against the bytes left
// before anything is read.
func checkMsgpack(data []byte) error {
	// open[d] counts the values still expected by the container open at
	// depth d.
	var openBuf [32]uint64
	open := openBuf[:0]
	i := 0
	for {
		if i >= len(data) {
			return fmt.Errorf("msgpack: value truncated at offset %d", i)
		}
		at := i
		c := data[i]
		i++
		var (
			skip      uint64 // bytes of the value after its code and length
			lenSz     int    // bytes of the length that follows the code
			items     uint64 // values the container holds
			container bool   // array or map
		)
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			items, container = 2*uint64(c&0x0f), true
		case c <= 0x9f: // fixarray
			items, container = uint64(c&0x0f), true
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		default:
			switch c {
			case 0xc0, 0xc2, 0xc3: // nil, false, true
			case 0xc4, 0xd9: // bin8, str8
				lenSz = 1
			case 0xc5, 0xda: // bin16, str16
				lenSz = 2
			case 0xc6, 0xdb: // bin32, str32
				lenSz = 4
			case 0xc7: // ext8: length, type, data
				lenSz, skip = 1, 1
			case 0xc8: // ext16
				lenSz, skip = 2, 1
			case 0xc9: // ext32
				lenSz, skip = 4, 1
			case 0xcc, 0xd0: // uint8, int8
				skip = 1
			case 0xcd, 0xd1: // uint16, int16
				skip = 2
			case 0xca, 0xce, 0xd2: // float32, uint32, int32
				skip = 4
			case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
				skip = 8
			case 0xd4: // fixext1: type, data
				skip = 1 + 1
			case 0xd5: // fixext2
				skip = 1 + 2
			case 0xd6: // fixext4
				skip = 1 + 4
			case 0xd7: // fixext8
				skip = 1 + 8
			case 0xd8: // fixext16
				skip = 1 + 16
			case 0xdc, 0xdd, 0xde, 0xdf: // array16, array32, map16, map32
				lenSz, container = 2, true
				if c == 0xdd || c == 0xdf {
					lenSz = 4
				}
			default: // 0xc1 is never used
				return fmt.Errorf("msgpack: invalid code 0x%02x at offset %d", c, at)
			}
		}
		if lenSz > 0 {
			if len(data)-i < lenSz {
				return fmt.Errorf("msgpack: value truncated at offset %d", at)
			}
			var n uint64
			switch lenSz {
			case 1:
				n = uint64(data[i])
			case 2:
				n = uint64(binary.BigEndian.Uint16(data[i:]))
			default:
				n = uint64(binary.BigEndian.Uint32(data[i:]))
			}
			i += lenSz
			switch c {
			case 0xdc, 0xdd:
				items = n
			case 0xde, 0xdf:
				items = 2 * n
			default:
				skip += n
			}
		}
		// Every value takes at least one byte, so a container can never
		// hold more values than there are bytes left.
		if skip > uint64(len(data)-i) || items > uint64(len(data)-i) {
			return fmt.Errorf("msgpack: value truncated at offset %d", at)
		}
		i += int(skip)
		if container && len(open) == MaxDepth {
			return fmt.Errorf("msgpack: nested deeper than %d at offset %d", MaxDepth, at)
		}
		if items > 0 {
			open = append(open, items)
			continue
		}
		// A value is complete: it completes the containers it ends.
		for len(open) > 0 {
			last := len(open) - 1
			open[last]--
			if open[last] > 0 {
				break
			}
			open = open[:last]
		}
		if len(open) == 0 {
			if i < len(data) {
				return fmt.Errorf("msgpack: %d trailing bytes after the value at offset %d", len(data)-i, i)
			}
			return nil
		}
	}
}
