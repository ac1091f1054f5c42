package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
)

// mailboxCount is how many records the mailbox of ref holds.
func mailboxCount(t *testing.T, conn *bus.Conn, ref records.Ref) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, filter, ok := conn.Names().Stored(conn.Names().Mailbox(ref))
	if !ok {
		t.Fatalf("no stream stores %s", conn.Names().Mailbox(ref))
	}
	s, err := conn.JetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// TestSendRefusesUndeclaredType: counter declares "inc"; a record of
// another type (none given: "message") is refused where it is sent, with
// the types and the fix, and nothing is stored; --any-type sends it (and it
// dead-letters, as before); ea kinds lists the types.
func TestSendRefusesUndeclaredType(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	log := slog.New(slog.DiscardHandler)
	actortest.StartNode(t, conn, actor.Options{Logger: log}, kinds.Counter())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	runStore(t, ctx, &wg, conn, log)
	w := &world{url: srv.URL}
	ref := records.Ref{Kind: "counter", ID: "t1"}
	w.ea(t, "", "create", ref.String()).ok(t, "create")

	r := w.ea(t, "", "send", ref.String(), `{"by":1}`)
	r.fails(t, "send without --type", exitUsage, `kind counter handles record types inc, not "message"`)
	for _, want := range []string{"--type inc", "--any-type", "nothing was sent"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr %q does not say %q", r.err, want)
		}
	}
	w.ea(t, "", "send", ref.String(), `{"by":1}`, "--type", "dec", "--wait").fails(t, "send --type dec", exitUsage, `not "dec"`)
	if n := mailboxCount(t, conn, ref); n != 0 {
		t.Fatalf("%d records in the mailbox after refused sends, want 0", n)
	}
	w.ea(t, "", "send", ref.String(), `{"by":1}`, "--any-type", "--wait").fails(t, "send --any-type", exitDead, `unknown record type "message"`)
	r = w.ea(t, "", "send", ref.String(), `{"by":2}`, "--type", "inc", "--wait").ok(t, "send --type inc")
	if !strings.Contains(r.out, `{"count":2}`) {
		t.Errorf("send --type inc printed %q", r.out)
	}
	r = w.ea(t, "", "kinds").ok(t, "kinds")
	if !strings.Contains(r.out, "TYPES") || !strings.Contains(r.out, "inc") {
		t.Errorf("ea kinds printed %q, want a TYPES column with inc", r.out)
	}
}

// TestRemoteStallExplained: a remote kind with no worker. ea send --wait
// times out naming the real cause (no worker of the kind answers on its
// subject), not a missing node; ea state says what the record waits for;
// ea kinds counts the kind's workers (none answers).
func TestRemoteStallExplained(t *testing.T) {
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	log := slog.New(slog.DiscardHandler)
	rk, err := remote.New(conn, "rcounter", remote.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	actortest.StartNode(t, conn, actor.Options{Logger: log}, kinds.Counter(), rk)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	runStore(t, ctx, &wg, conn, log)
	w := &world{url: srv.URL}
	subject := conn.Names().Logic("rcounter")

	w.ea(t, "", "create", "rcounter/r1").ok(t, "create")
	start := time.Now()
	r := w.ea(t, "", "--timeout", "3s", "send", "rcounter/r1", `{"by":1}`, "--type", "inc", "--wait")
	t.Logf("send --wait with no worker: exit %d after %v: %s", r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.err))
	r.fails(t, "send --wait with no worker", exitUnavailable, "no worker of remote kind rcounter answers on "+subject)
	if strings.Contains(r.err, "is a node hosting") {
		t.Errorf("stderr %q blames a missing node", r.err)
	}
	r = w.ea(t, "", "state", "rcounter/r1").ok(t, "state")
	if !strings.Contains(r.out, "waiting") || !strings.Contains(r.out, "no worker of remote kind rcounter answers on "+subject) {
		t.Errorf("ea state printed %q, want what the record waits for", r.out)
	}
	r = w.ea(t, "", "kinds").ok(t, "kinds")
	var line string
	for l := range strings.Lines(r.out) {
		if strings.HasPrefix(l, "rcounter ") {
			line = l
		}
	}
	if !strings.Contains(line, "0: none answers "+subject) || !strings.Contains(line, "any") {
		t.Errorf("ea kinds' rcounter line %q, want types any and 0 workers answering on %s", line, subject)
	}
}
