package actor

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// EncodeMsgpack writes the document as a msgpack map without reflection: it
// is encoded once per record processed.
func (d Document) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := 6
	if len(d.Ahead) > 0 {
		n++
	}
	if d.Error != "" {
		n++
	}
	if d.Owner != "" {
		n++
	}
	if d.Version > 1 {
		n++
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	str := func(k, v string) error {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		return enc.EncodeString(v)
	}
	if err := str("id", d.ID); err != nil {
		return err
	}
	if err := str("kind", d.Kind); err != nil {
		return err
	}
	if err := str("status", string(d.Status)); err != nil {
		return err
	}
	if err := enc.EncodeString("state"); err != nil {
		return err
	}
	if len(d.State) == 0 {
		if err := enc.EncodeNil(); err != nil {
			return err
		}
	} else if err := d.State.EncodeMsgpack(enc); err != nil {
		return err
	}
	if err := enc.EncodeString("seq"); err != nil {
		return err
	}
	if err := enc.EncodeUint(d.Seq); err != nil {
		return err
	}
	if len(d.Ahead) > 0 {
		if err := enc.EncodeString("ahead"); err != nil {
			return err
		}
		if err := enc.EncodeArrayLen(len(d.Ahead)); err != nil {
			return err
		}
		for _, s := range d.Ahead {
			if err := enc.EncodeUint(s); err != nil {
				return err
			}
		}
	}
	if err := enc.EncodeString("updated"); err != nil {
		return err
	}
	if err := enc.EncodeTime(d.Updated); err != nil {
		return err
	}
	if d.Error != "" {
		if err := str("error", d.Error); err != nil {
			return err
		}
	}
	if d.Owner != "" {
		if err := str("owner", d.Owner); err != nil {
			return err
		}
	}
	if d.Version > 1 {
		if err := enc.EncodeString("version"); err != nil {
			return err
		}
		return enc.EncodeInt(int64(d.Version))
	}
	return nil
}

// DecodeMsgpack reads a document written by any msgpack writer: keys in any
// order, unknown keys skipped.
func (d *Document) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	*d = Document{}
	for range max(n, 0) {
		key, err := dec.DecodeString()
		if err != nil {
			return fmt.Errorf("state document key: %w", err)
		}
		switch key {
		case "id":
			d.ID, err = dec.DecodeString()
		case "kind":
			d.Kind, err = dec.DecodeString()
		case "status":
			var s string
			s, err = dec.DecodeString()
			d.Status = Status(s)
		case "state":
			d.State, err = dec.DecodeRaw()
			if err == nil && len(d.State) == 1 && d.State[0] == 0xc0 { // nil
				d.State = nil
			}
		case "seq":
			d.Seq, err = dec.DecodeUint64()
		case "ahead":
			var l int
			if l, err = dec.DecodeArrayLen(); err == nil && l > 0 {
				d.Ahead = make([]uint64, l)
				for i := range d.Ahead {
					if d.Ahead[i], err = dec.DecodeUint64(); err != nil {
						break
					}
				}
			}
		case "updated":
			d.Updated, err = dec.DecodeTime()
		case "error":
			d.Error, err = dec.DecodeString()
		case "owner":
			d.Owner, err = dec.DecodeString()
		case "version":
			d.Version, err = decodeVersion(dec)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return fmt.Errorf("state document field %q: %w", key, err)
		}
	}
	return nil
}

var (
	_ msgpack.CustomEncoder = Document{}
	_ msgpack.CustomDecoder = (*Document)(nil)
)
