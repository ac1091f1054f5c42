package supervisor_test

import (
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDemoStreamGroups runs the demo on a deployment with 4 stream groups:
// the orchestrations' mailboxes fall in several groups, the supervisor reads
// the results and timeouts in every group's stream, and each orchestration
// completes with exact results, its results in its group's mailbox stream
// and one status record per change in its group's outbox stream.
func TestDemoStreamGroups(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	srv.MapPartitions(t, 8)
	cfg := bus.Config{Partitions: 8, Groups: 4}
	conn := srv.Connect(t, cfg)
	n := conn.Names()
	startWorkers(t, srv.Connect(t, cfg))
	startSupervisor(t, srv.Connect(t, cfg))
	c := newClient(t, conn)
	ctx := ctxT(t)

	groups := map[int]bool{}
	var ids []string
	for len(ids) < 4 || len(groups) < 2 {
		if len(ids) == 16 {
			t.Fatalf("16 orchestrations all in group(s) %v: the test proves nothing", groups)
		}
		id, err := c.Start(ctx, "demo", map[string]any{"text": "hello world"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		groups[n.GroupOf(records.Ref{Kind: supervisor.MailboxKind, ID: id})] = true
	}
	for _, id := range ids {
		waitStatus(t, c, id, supervisor.StatusWaiting)
		if _, err := c.Input(ctx, id, map[string]string{"note": "from me"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		o := waitStatus(t, c, id, supervisor.StatusCompleted)
		r := demoResults(t, o)
		if r.A != "HELLO WORLD" || r.Note != "from me" || r.B != "me from WORLD HELLO" || r.Attempts != 1 || o.Steps != 4 {
			t.Fatalf("%s: %+v, results %+v", id, o, r)
		}
		ref := records.Ref{Kind: supervisor.MailboxKind, ID: id}
		for _, c := range []struct {
			stream, subject string
			want            uint64
		}{
			{n.MailboxStreamFor(ref), n.StoredMailbox(ref), 2}, // the two tasks' results
			{n.OutboxStreamFor(ref), n.Outbox(ref), 4},         // a status record per change
		} {
			s, err := conn.JetStream().Stream(ctx, c.stream)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx, jetstream.WithSubjectFilter(c.subject))
			if err != nil {
				t.Fatal(err)
			}
			if got := info.State.Subjects[c.subject]; got != c.want {
				t.Fatalf("%s: %d records on %s in %s, want %d (%v)", id, got, c.subject, c.stream, c.want, info.State.Subjects)
			}
		}
	}
}
