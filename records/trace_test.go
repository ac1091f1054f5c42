package records_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/records"
)

const (
	validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	validState  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

func TestTraceContextRoundTrip(t *testing.T) {
	r, err := records.New("inc", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.TraceParent, r.TraceState = validParent, validState
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if got := h.Get(records.HeaderTraceParent); got != validParent {
		t.Fatalf("traceparent header %q, want %q", got, validParent)
	}
	back, err := records.FromMsg("s", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back.TraceParent != validParent || back.TraceState != validState {
		t.Fatalf("read back %q %q", back.TraceParent, back.TraceState)
	}
	// A client that canonicalizes header keys like net/http.
	h2 := nats.Header{"Traceparent": {validParent}, "Tracestate": {validState}}
	back, err = records.FromMsg("s", h2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back.TraceParent != validParent || back.TraceState != validState {
		t.Fatalf("canonical keys read back %q %q", back.TraceParent, back.TraceState)
	}
}

func TestTraceContextMalformed(t *testing.T) {
	bad := []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",      // too short
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // version 00 with more
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero span id
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper case
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + strings.Repeat("a", 300),
	}
	for _, tp := range bad[1:] {
		r := records.Record{ID: "x", TraceParent: tp}
		err := r.Validate()
		var fe *records.FieldError
		if !errors.As(err, &fe) || fe.Header != records.HeaderTraceParent || !errors.Is(err, records.ErrMalformed) {
			t.Errorf("Validate(traceparent %q) = %v, want a FieldError naming traceparent", tp, err)
		}
		// On the wire a malformed trace context is ignored, never refused.
		got, err := records.FromMsg("s", nats.Header{records.HeaderTraceParent: {tp}, records.HeaderTraceState: {validState}}, nil)
		if err != nil {
			t.Errorf("FromMsg(traceparent %q): %v, want the record without trace context", tp, err)
		}
		if got.TraceParent != "" || got.TraceState != "" {
			t.Errorf("FromMsg(traceparent %q) kept %q %q", tp, got.TraceParent, got.TraceState)
		}
	}
	// A later version may carry more fields.
	future := "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-abc"
	if err := (records.Record{TraceParent: future}).Validate(); err != nil {
		t.Errorf("future version: %v", err)
	}
	for _, ts := range []string{strings.Repeat("a", 513), "a=b\r\nx", " a=b"} {
		err := records.Record{TraceParent: validParent, TraceState: ts}.Validate()
		var fe *records.FieldError
		if !errors.As(err, &fe) || fe.Header != records.HeaderTraceState {
			t.Errorf("Validate(tracestate %q) = %v, want a FieldError naming tracestate", ts, err)
		}
		got, err := records.FromMsg("s", nats.Header{records.HeaderTraceParent: {validParent}, records.HeaderTraceState: {ts}}, nil)
		if err != nil || got.TraceParent != validParent || got.TraceState != "" {
			t.Errorf("FromMsg(tracestate %q) = %q %q %v, want the traceparent alone", ts, got.TraceParent, got.TraceState, err)
		}
	}
	if err := (records.Record{TraceState: validState}).Validate(); err == nil {
		t.Error("Validate accepted a tracestate without traceparent")
	}
}
