package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
)

// publisherFixture is a server with stream S on s.>, a connection and a
// Publisher on it.
func publisherFixture(t *testing.T, timeout time.Duration) (*nats.Conn, jetstream.JetStream, *bus.Publisher) {
	t.Helper()
	srv := bustest.NewServer(t)
	nc, js := srv.Client(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	p, err := bus.NewPublisher(nc, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return nc, js, p
}

func TestPublisher(t *testing.T) {
	t.Parallel()
	_, js, p := publisherFixture(t, 0)
	ctx := t.Context()

	msg := nats.NewMsg("s.a")
	msg.Data = []byte("one")
	msg.Header.Set(jetstream.MsgIDHeader, "id-1")
	ack, err := p.PublishMsg(ctx, msg)
	if err != nil || ack.Stream != "S" || ack.Sequence != 1 || ack.Duplicate {
		t.Fatalf("publish = %+v, %v; want S/1, not a duplicate", ack, err)
	}
	if msg.Reply != "" {
		t.Errorf("the message's Reply was set to %q", msg.Reply)
	}
	ack, err = p.PublishMsg(ctx, msg)
	if err != nil || ack.Sequence != 1 || !ack.Duplicate {
		t.Fatalf("publish again = %+v, %v; want the duplicate of 1", ack, err)
	}

	t.Run("a refusal is the server's APIError", func(t *testing.T) {
		m := nats.NewMsg("s.a")
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "7")
		_, err := p.PublishMsg(ctx, m)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
			t.Fatalf("err = %v (%T), want APIError %d", err, err, jetstream.JSErrCodeStreamWrongLastSequence)
		}
	})

	t.Run("no stream", func(t *testing.T) {
		start := time.Now()
		_, err := p.PublishMsg(ctx, nats.NewMsg("nostream.a"))
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("err = %v, want ErrNoStreamResponse", err)
		}
		if d := time.Since(start); d < 2*jetstream.DefaultPubRetryWait {
			t.Errorf("gave up after %v, want two retries %v apart", d, jetstream.DefaultPubRetryWait)
		}
	})

	t.Run("concurrent calls each get their own answer", func(t *testing.T) {
		info, err := js.Stream(ctx, "S")
		if err != nil {
			t.Fatal(err)
		}
		before := info.CachedInfo().State.LastSeq
		const workers, each = 8, 200
		var mu sync.Mutex
		seen := make(map[uint64]string)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					m := nats.NewMsg(fmt.Sprintf("s.w%d", w))
					m.Data = fmt.Appendf(nil, "%d/%d", w, i)
					ack, err := p.PublishMsg(ctx, m)
					if err != nil {
						t.Errorf("publish %s: %v", m.Data, err)
						return
					}
					mu.Lock()
					seen[ack.Sequence] = string(m.Data)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != workers*each {
			t.Fatalf("%d distinct sequences, want %d", len(seen), workers*each)
		}
		for seq, data := range seen { // each answer names its own message
			if seq <= before {
				t.Fatalf("sequence %d was stored before the test", seq)
			}
			raw, err := info.GetMsg(ctx, seq)
			if err != nil || string(raw.Data) != data {
				t.Fatalf("sequence %d holds %q (%v), the answer was for %q", seq, raw.Data, err, data)
			}
		}
	})
}

// TestPublisherGivesUp checks the timeout and cancellation, and that an
// answer that comes after its call gave up reaches no later call.
func TestPublisherGivesUp(t *testing.T) {
	t.Parallel()
	nc, _, p := publisherFixture(t, 200*time.Millisecond)
	// A core subscriber on a subject no stream holds: it answers late.
	release := make(chan struct{})
	var late sync.WaitGroup
	sub, err := nc.Subscribe("slow.>", func(m *nats.Msg) {
		late.Go(func() {
			<-release
			ack, _ := json.Marshal(jetstream.PubAck{Stream: "S", Sequence: 999})
			m.Respond(ack)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	defer late.Wait()

	start := time.Now()
	_, err = p.PublishMsg(t.Context(), nats.NewMsg("slow.a"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded after the publisher's timeout", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want about 200ms", d)
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := p.PublishMsg(ctx, nats.NewMsg("slow.b")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want Canceled", err)
	}

	close(release) // both late answers arrive now
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		ack, err := p.PublishMsg(t.Context(), nats.NewMsg("s.after"))
		if err != nil || ack.Sequence == 999 {
			t.Fatalf("publish after the late answers = %+v, %v; want its own answer", ack, err)
		}
	}
}

func TestNewPublisherRefuses(t *testing.T) {
	t.Parallel()
	if _, err := bus.NewPublisher(nil, 0); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("no connection: err = %v, want ErrInvalidConfig", err)
	}
	srv := bustest.NewServer(t)
	nc, _ := srv.Client(t)
	if _, err := bus.NewPublisher(nc, -time.Second); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("negative timeout: err = %v, want ErrInvalidConfig", err)
	}
}

// TestPublisherAckLost: a call waiting for an acknowledgement when the
// connection drops (here the server restarts) ends at once with ErrAckLost,
// not after its timeout, and the Publisher works over the new connection.
func TestPublisherAckLost(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	if _, err := conn.JetStream().CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	p, err := conn.Publisher(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A subscriber that never answers on unanswered.>: the call waits for
	// its timeout unless the connection drops.
	nc, _ := srv.Client(t)
	sub, err := nc.SubscribeSync("unanswered.>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.PublishMsg(t.Context(), nats.NewMsg("unanswered.a"))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the call ended before the connection dropped: %v", err)
	default:
	}
	srv.Restart(t)
	select {
	case err := <-done:
		if !errors.Is(err, bus.ErrAckLost) {
			t.Fatalf("err = %v, want ErrAckLost", err)
		}
		t.Logf("ended %s after the call, with the connection's drop", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not end within 20s of the connection dropping (its timeout is a minute)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		ack, err := p.PublishMsg(ctx, nats.NewMsg("s.after"))
		if err == nil {
			if ack.Sequence == 0 {
				t.Fatalf("ack %+v", ack)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no publish acknowledged over the new connection: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
