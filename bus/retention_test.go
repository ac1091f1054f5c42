package bus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/nats-io/nats.go/jetstream"
)

// limitsOf returns the age and size limits of stream name.
func limitsOf(t *testing.T, conn *bus.Conn, name string) (time.Duration, int64) {
	t.Helper()
	s, err := conn.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	return c.MaxAge, c.MaxBytes
}

// TestRetention: provisioning applies the retention settings to the log and
// dead-letter streams, a later provisioning without settings keeps them,
// one with other settings changes them on the existing streams, and
// "unlimited" removes a limit.
func TestRetention(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	ctx := t.Context()
	provision := func(r bus.Retention) *bus.Conn {
		t.Helper()
		conn := connect(t, srv, bus.Config{Retention: r})
		if err := conn.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	check := func(conn *bus.Conn, logAge time.Duration, logBytes int64, deadAge time.Duration, deadBytes int64) {
		t.Helper()
		n := conn.Names()
		for _, s := range []string{n.MailboxStream(), n.OutboxStream()} {
			if age, size := limitsOf(t, conn, s); age != logAge || size != logBytes {
				t.Errorf("%s: max age %s, max bytes %d; want %s, %d", s, age, size, logAge, logBytes)
			}
		}
		if age, size := limitsOf(t, conn, n.DeadStream()); age != deadAge || size != deadBytes {
			t.Errorf("%s: max age %s, max bytes %d; want %s, %d", n.DeadStream(), age, size, deadAge, deadBytes)
		}
	}
	conn := provision(bus.Retention{})
	check(conn, 0, -1, 0, -1)
	provision(bus.Retention{LogMaxAge: 30 * 24 * time.Hour, LogMaxBytes: 1 << 30, DeadMaxAge: 90 * 24 * time.Hour, DeadMaxBytes: 64 << 20})
	check(conn, 30*24*time.Hour, 1<<30, 90*24*time.Hour, 64<<20)
	provision(bus.Retention{}) // another binary without settings: kept
	check(conn, 30*24*time.Hour, 1<<30, 90*24*time.Hour, 64<<20)
	provision(bus.Retention{LogMaxAge: bus.Unlimited, DeadMaxBytes: 32 << 20})
	check(conn, 0, 1<<30, 90*24*time.Hour, 32<<20)
	provision(bus.Retention{LogMaxBytes: bus.Unlimited, DeadMaxAge: bus.Unlimited, DeadMaxBytes: bus.Unlimited})
	check(conn, 0, -1, 0, -1)
}

// TestRetentionDrops: past the log's size limit the oldest records go.
func TestRetentionDrops(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := connect(t, srv, bus.Config{Retention: bus.Retention{LogMaxBytes: bus.MinRetentionBytes}})
	ctx := t.Context()
	if err := conn.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 100<<10)
	for range 120 { // 12 MB into an 8 MiB stream
		if _, err := conn.JetStream().Publish(ctx, "ea.out.k.a", payload); err != nil {
			t.Fatal(err)
		}
	}
	s, err := conn.JetStream().Stream(ctx, conn.Names().OutboxStream())
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	if st.FirstSeq <= 1 || st.Bytes > bus.MinRetentionBytes || st.LastSeq != 120 {
		t.Fatalf("outbox state: first %d last %d bytes %d; want the oldest dropped, at most %d bytes", st.FirstSeq, st.LastSeq, st.Bytes, bus.MinRetentionBytes)
	}
	if _, err := s.GetMsg(ctx, 1); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("record 1: %v, want not found", err)
	}
}

// TestRetentionInvalid: bad retention settings are configuration errors.
func TestRetentionInvalid(t *testing.T) {
	t.Parallel()
	for _, r := range []bus.Retention{
		{LogMaxAge: -5},
		{LogMaxAge: time.Minute}, // under the duplicate window
		{DeadMaxAge: time.Second},
		{LogMaxBytes: 1000},
		{DeadMaxBytes: -7},
	} {
		err := bus.Config{Retention: r}.Validate()
		if !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", r, err)
		}
	}
	if err := (bus.Config{Retention: bus.Retention{LogMaxAge: bus.Unlimited, LogMaxBytes: bus.MinRetentionBytes}}).Validate(); err != nil {
		t.Fatal(err)
	}
}
