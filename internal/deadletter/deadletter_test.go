package deadletter_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/deadletter"
	"github.com/effectors/effectors/records"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReplay turns dead letters, as the runtime writes them, back into
// records: whole, truncated (the original read from its stream), and the
// ones that cannot be replayed.
func TestReplay(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	ctx := t.Context()
	n := conn.Names()
	ref := records.Ref{Kind: "counter", ID: "c1"}
	orig, err := records.NewJSON("inc", map[string]int{"by": 7})
	if err != nil {
		t.Fatal(err)
	}
	orig.ID, orig.Process, orig.Owner = "orig-1", "p1", "alice"
	ack, err := conn.JetStream().PublishMsg(ctx, orig.Msg(n.Mailbox(ref)))
	if err != nil {
		t.Fatal(err)
	}
	// dead builds the dead letter of orig as the runtime stores it.
	dead := func(truncated string, withWhere bool) bus.StoredMsg {
		m := orig.Msg(n.Dead(ref))
		m.Header.Set(records.HeaderID, records.DeadID(orig.ID))
		m.Header.Set(records.HeaderSubject, n.Mailbox(ref))
		m.Header.Set(records.HeaderDeadReason, "rejected")
		if withWhere {
			m.Header.Set(records.HeaderStream, n.MailboxStream())
			m.Header.Set(records.HeaderSeq, strconv.FormatUint(ack.Sequence, 10))
		}
		if truncated != "" {
			m.Header.Set(records.HeaderTruncated, truncated)
			m.Data = m.Data[:3]
		}
		return bus.StoredMsg{Subject: m.Subject, Seq: 9, Header: m.Header, Data: m.Data}
	}
	check := func(name string, m bus.StoredMsg) {
		t.Helper()
		rec, to, err := deadletter.Replay(ctx, conn, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if to != ref || rec.ID == orig.ID || rec.ID == "" || rec.Cause != "orig-1" || rec.Type != "inc" || rec.Process != "p1" ||
			rec.Owner != "alice" || string(rec.Payload) != string(orig.Payload) || rec.Subject != "" || rec.Seq != 0 || !rec.Time.After(orig.Time) {
			t.Fatalf("%s: replay %+v to %v; want a new record caused by orig-1, its payload and owner, to %v", name, rec, to, ref)
		}
	}
	check("whole", dead("", true))
	check("truncated", dead(records.TruncatedPayload, true))

	m := dead(records.TruncatedPayload, false)
	if _, _, err := deadletter.Replay(ctx, conn, m); !errors.Is(err, deadletter.ErrNoOriginal) {
		t.Errorf("truncated, no EA-Stream: %v, want ErrNoOriginal", err)
	}
	m = dead(records.TruncatedPayload, true)
	m.Header.Set(records.HeaderSeq, strconv.FormatUint(ack.Sequence+100, 10))
	if _, _, err := deadletter.Replay(ctx, conn, m); !errors.Is(err, deadletter.ErrNoOriginal) || !errors.Is(err, bus.ErrNoMessage) {
		t.Errorf("truncated, original gone: %v, want ErrNoOriginal wrapping ErrNoMessage", err)
	}
	m = dead("", true)
	m.Header.Set(records.HeaderSubject, n.Outbox(ref))
	if _, _, err := deadletter.Replay(ctx, conn, m); !errors.Is(err, deadletter.ErrNoMailbox) {
		t.Errorf("sent to an outbox: %v, want ErrNoMailbox", err)
	}
	m = dead("", true)
	m.Data = []byte("{not json")
	if _, _, err := deadletter.Replay(ctx, conn, m); !errors.Is(err, deadletter.ErrInvalid) {
		t.Errorf("payload not JSON: %v, want ErrInvalid", err)
	}
	if got := deadletter.OriginalID(records.DeadID("orig-1")); got != "orig-1" {
		t.Errorf("OriginalID = %q", got)
	}
}
