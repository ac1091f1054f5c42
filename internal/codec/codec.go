// Package codec holds the one msgpack configuration every package of the
// module uses, so a value encodes the same way in a record payload, a state
// document and a KV entry.
//
// Struct fields are named by their `json` tags, so one set of tags serves both
// the JSON and the msgpack form of a type, and a state written by Go reads as
// the same map in any language.
package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

var encPool = sync.Pool{New: func() any {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	enc.SetOmitEmpty(false)
	enc.UseCompactInts(true)
	return &encoder{buf: &buf, enc: enc}
}}

type encoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

// Marshal encodes v as msgpack, naming struct fields by their json tags.
func Marshal(v any) ([]byte, error) {
	e := encPool.Get().(*encoder)
	defer encPool.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

var decPool = sync.Pool{New: func() any {
	d := &decoder{rd: bytes.NewReader(nil)}
	d.dec = msgpack.NewDecoder(d.rd)
	d.dec.SetCustomStructTag("json")
	return d
}}

type decoder struct {
	rd  *bytes.Reader
	dec *msgpack.Decoder
}

// Unmarshal decodes msgpack data into v, naming struct fields by their json
// tags. Maps decode as map[string]any, so the result converts to JSON.
func Unmarshal(data []byte, v any) error {
	d := decPool.Get().(*decoder)
	defer decPool.Put(d)
	d.rd.Reset(data)
	d.dec.ResetReader(d.rd) // keeps the struct tag
	return d.dec.Decode(v)
}

// FromJSON converts one JSON value to msgpack as [Marshal] encodes it,
// keeping integers integers (int64, or uint64 above its range; so they
// decode into integer fields) and other numbers float64. Data after the
// value, or a number out of float64's range, is an error.
func FromJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	v, err := numbers(v)
	if err != nil {
		return nil, err
	}
	return Marshal(v)
}

// numbers replaces json.Numbers by int64 (or uint64) when integral,
// float64 otherwise; a number out of float64's range is an error.
func numbers(v any) (any, error) {
	var err error
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %.40s: %w", v, err)
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			if v[k], err = numbers(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range v {
			if v[i], err = numbers(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
