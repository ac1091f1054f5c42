package proctest

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"
)

// StateDoc is an effector's state document as any msgpack reader sees it
// (the wire contract's fields, not the actor package's type): what a test
// that checks a node from outside reads.
type StateDoc struct {
	ID     string         `msgpack:"id"`
	Kind   string         `msgpack:"kind"`
	Status string         `msgpack:"status"`
	State  map[string]any `msgpack:"state"`
	Seq    uint64         `msgpack:"seq"`
	Error  string         `msgpack:"error"`
}

// Int returns the user state's field as an int64, -1 when it is missing or
// not an integer (msgpack keeps integers in the smallest type that fits).
func (d StateDoc) Int(field string) int64 {
	switch v := d.State[field].(type) {
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return int64(v)
	}
	return -1
}

// Count is the state's count field (the example counter's), -1 if absent.
func (d StateDoc) Count() int64 { return d.Int("count") }

// ReadState reads key (<kind>.<id>) from the state bucket kv and decodes it.
func ReadState(ctx context.Context, kv jetstream.KeyValue, key string) (StateDoc, error) {
	ent, err := kv.Get(ctx, key)
	if err != nil {
		return StateDoc{}, fmt.Errorf("state %s: %w", key, err)
	}
	var d StateDoc
	if err := msgpack.Unmarshal(ent.Value(), &d); err != nil {
		return StateDoc{}, fmt.Errorf("decode state %s: %w", key, err)
	}
	return d, nil
}
