package actor

import (
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
)

// TestDeadLetterMsgFits: whatever the record, its dead letter fits the
// limits (max_payload with headers, and JetStream's header limit), carries
// the reference to the original and says what it left out.
func TestDeadLetterMsgFits(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	long := strings.Repeat("x", 70_000)
	tests := []struct {
		name      string
		header    nats.Header
		data      int
		max       int64
		bare      bool
		truncated string // want EA-Truncated
		kept      []string
	}{
		{"small record: copied whole", nats.Header{"EA-Type": {"inc"}, "Nats-Msg-Id": {"r1"}}, 100, mib, false, "", []string{"EA-Type"}},
		{"payload at the limit", nats.Header{"EA-Type": {"inc"}, "Nats-Msg-Id": {"r1"}}, mib - 40, mib, false, "payload", []string{"EA-Type"}},
		{"huge header", nats.Header{"EA-Type": {long[:65300]}, "Nats-Msg-Id": {"r1"}, "EA-Process": {"p"}}, 10, mib, false, "headers", []string{"EA-Process"}},
		{"huge header and payload", nats.Header{"EA-Type": {long[:65300]}, "EA-Cause": {"c"}}, mib - 500, mib, false, "headers,payload", []string{"EA-Cause"}},
		{"many values of one header", nats.Header{"X-Many": strings.Split(strings.Repeat("abcdefgh,", 9000), ",")}, 10, mib, false, "headers", nil},
		{"tiny max_payload", nats.Header{"EA-Type": {"inc"}}, 5000, 4096, false, "payload", []string{"EA-Type"}},
		{"bare", nats.Header{"EA-Type": {"inc"}}, 5000, mib, true, "headers,payload", nil},
		{"no headers, no payload", nil, 0, mib, false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := stored{stream: "EA_RECORDS", subject: "ea.mbox.counter.c1", seq: 42, header: tt.header, data: make([]byte, tt.data)}
			msg := deadLetterMsg("ea.dead.counter.c1", rec, "oversize", errors.New(long), tt.max, tt.bare)
			hdr := bus.HeaderSize(msg.Header)
			if hdr > bus.MaxHeaderBytes || int64(hdr+len(msg.Data)) > tt.max && tt.max > 2048 {
				t.Fatalf("dead letter of %d header + %d payload bytes exceeds max %d / header %d", hdr, len(msg.Data), tt.max, bus.MaxHeaderBytes)
			}
			if got := msg.Header.Get(records.HeaderTruncated); got != tt.truncated {
				t.Errorf("EA-Truncated %q, want %q", got, tt.truncated)
			}
			for k, want := range map[string]string{
				records.HeaderSeq: "42", records.HeaderStream: "EA_RECORDS", records.HeaderSubject: "ea.mbox.counter.c1",
				records.HeaderDeadReason: "oversize",
			} {
				if got := msg.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if e := msg.Header.Get(records.HeaderError); len(e) > maxErrorText+len("…") {
				t.Errorf("EA-Error of %d bytes", len(e))
			}
			wantID := "dead:s42"
			if id := tt.header.Get(records.HeaderID); id != "" {
				wantID = "dead:" + id
			}
			if got := msg.Header.Get(records.HeaderID); got != wantID {
				t.Errorf("id %q, want %q", got, wantID)
			}
			for _, k := range tt.kept {
				if msg.Header.Get(k) != tt.header.Get(k) {
					t.Errorf("header %s not kept", k)
				}
			}
			if !strings.Contains(tt.truncated, "payload") && len(msg.Data) != tt.data {
				t.Errorf("payload of %d bytes, want %d", len(msg.Data), tt.data)
			}
		})
	}
}

// TestDeadLetterMsgDirectives: JetStream directives of the original are not
// copied, so they cannot make the dead-letter stream refuse or roll up.
func TestDeadLetterMsgDirectives(t *testing.T) {
	t.Parallel()
	h := nats.Header{
		"Nats-Msg-Id": {"r1"}, "Nats-Expected-Last-Sequence": {"999"}, "nats-rollup": {"all"},
		"NATS-TTL": {"1s"}, "EA-Dead-Reason": {"fake"}, "ea-seq": {"1"}, "EA-Type": {"inc"},
	}
	msg := deadLetterMsg("ea.dead.c.x", stored{seq: 7, header: h}, "decode", errors.New("bad"), 1<<20, false)
	for k := range msg.Header {
		switch k {
		case "Nats-Msg-Id", "EA-Type", records.HeaderError, records.HeaderDeadReason, records.HeaderSeq, records.HeaderSubject, records.HeaderStream:
		default:
			t.Errorf("header %s copied into the dead letter", k)
		}
	}
	if msg.Header.Get(records.HeaderDeadReason) != "decode" || msg.Header.Get(records.HeaderSeq) != "7" {
		t.Errorf("runtime headers overwritten: %v", msg.Header)
	}
}
