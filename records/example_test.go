package records_test

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/records"
)

func ExampleNew() {
	type Inc struct {
		By int `json:"by"`
	}
	r, err := records.New("inc", Inc{By: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	r.From = records.Ref{Kind: "counter", ID: "c0"}
	r.Priority = records.PriorityHigh
	// Fixed here so that the output is stable; New sets the current time.
	r.ID = "01JH5R4Q7Z3W9X2Y8V6T0S1R2Q"
	r.Time = time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC)
	if err := r.Validate(); err != nil {
		fmt.Println(err)
		return
	}

	m := r.Msg("ea.mbox.counter.c1")
	keys := make([]string, 0, len(m.Header))
	for k := range m.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Println(m.Subject)
	for _, k := range keys {
		fmt.Printf("%s: %s\n", k, m.Header.Get(k))
	}
	fmt.Printf("body: % x\n", m.Data)
	// Output:
	// ea.mbox.counter.c1
	// Content-Type: application/msgpack
	// EA-From: counter/c0
	// EA-Priority: high
	// EA-Time: 2026-01-02T15:04:05.123456789Z
	// EA-Type: inc
	// Nats-Msg-Id: 01JH5R4Q7Z3W9X2Y8V6T0S1R2Q
	// body: 81 a2 62 79 02
}

// A message as a plain client sends it:
//
//	nats pub ea.mbox.counter.c1 '{"by":2}' -H EA-Type:inc -H Content-Type:application/json
func ExampleFromMsg() {
	h := nats.Header{}
	h.Set("EA-Type", "inc")
	h.Set("Content-Type", "application/json")

	r, err := records.FromMsg("ea.mbox.counter.c1", h, []byte(`{"by":2}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	var inc struct {
		By int `json:"by"`
	}
	if err := r.Decode(&inc); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("type %s, from %q, content %s, by %d\n", r.Type, r.From, r.ContentType, inc.By)

	// The same body without its Content-Type is read as msgpack, and is not.
	_, err = records.FromMsg("ea.mbox.counter.c1", nats.Header{"EA-Type": {"inc"}}, []byte(`{"by":2}`))
	fmt.Println(errors.Is(err, records.ErrPayload), err)
	// Output:
	// type inc, from "", content application/json, by 2
	// true invalid application/msgpack payload: msgpack: 7 trailing bytes after the value at offset 1
}

func ExampleParseRef() {
	r, err := records.ParseRef("counter/c1")
	fmt.Println(r.Kind, r.ID, r, err)

	_, err = records.ParseRef("counter/c.1")
	fmt.Println(err)
	fmt.Println(errors.Is(err, records.ErrInvalidName))
	// Output:
	// counter c1 counter/c1 <nil>
	// invalid effector id "c.1": must be 1-128 characters of A-Z a-z 0-9 _ - (got '.')
	// true
}
