package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// TestLimits checks the limits bus computes against a real server: what
// HeaderSize says fits is stored, one byte more is refused, and each refusal
// is classified as too large (never as an outage to retry).
func TestLimits(t *testing.T) {
	t.Parallel()
	conn := bustest.NewServer(t).Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	max := conn.MaxPayload()
	if max != 1<<20 {
		t.Fatalf("MaxPayload = %d, want the server's default 1 MiB", max)
	}
	subject := conn.Names().Mailbox(records.Ref{Kind: "limits", ID: "x"})
	publish := func(h nats.Header, data []byte) error {
		_, err := conn.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: data})
		return err
	}

	// Headers plus payload exactly at max_payload: stored; one byte more:
	// refused by the client library before it reaches the server.
	h := nats.Header{"Nats-Msg-Id": []string{"a"}, "EA-Type": []string{"x"}}
	data := make([]byte, int(max)-bus.HeaderSize(h))
	if err := publish(h, data); err != nil {
		t.Fatalf("message of exactly max_payload: %v", err)
	}
	h.Set("Nats-Msg-Id", "b")
	err := publish(h, append(data, 0))
	if !errors.Is(err, nats.ErrMaxPayload) || !bus.TooLarge(err) || !bus.Unpublishable(err) {
		t.Fatalf("one byte over max_payload: %v; want nats.ErrMaxPayload, TooLarge, Unpublishable", err)
	}

	// A header block of exactly MaxHeaderBytes: stored; one byte more: the
	// server refuses it (JetStream error 10097).
	h = nats.Header{"Nats-Msg-Id": []string{"c"}}
	pad := bus.MaxHeaderBytes - bus.HeaderSize(h) - bus.HeaderLineSize("EA-Pad", "")
	h.Set("EA-Pad", strings.Repeat("p", pad))
	if got := bus.HeaderSize(h); got != bus.MaxHeaderBytes {
		t.Fatalf("HeaderSize = %d, want %d", got, bus.MaxHeaderBytes)
	}
	if err := publish(h, []byte("x")); err != nil {
		t.Fatalf("header block of exactly %d bytes: %v", bus.MaxHeaderBytes, err)
	}
	h.Set("Nats-Msg-Id", "d")
	h.Set("EA-Pad", strings.Repeat("p", pad+1))
	err = publish(h, []byte("x"))
	if err == nil || !bus.TooLarge(err) || !bus.Unpublishable(err) {
		t.Fatalf("header block of %d bytes: %v; want a too-large error", bus.MaxHeaderBytes+1, err)
	}
	t.Logf("header one byte over: %v", err)
}
