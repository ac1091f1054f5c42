package actor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// tallyState counts the records a tally applied.
type tallyState struct {
	N int `json:"n"`
}

// tallyKind counts records; with states it writes state records.
func tallyKind(states bool, maxBatch int) actor.Kind[tallyState] {
	return actor.Kind[tallyState]{
		Name:         "tally",
		StateRecords: states,
		MaxBatch:     maxBatch,
		Logic: func(ctx *actor.Context, s tallyState) (tallyState, error) {
			s.N++
			return s, ctx.Emit("ticked", s)
		},
	}
}

// outbox reads every record of r's outbox so far (FromStart), stopping once
// done says it has what it needs or after timeout.
func outbox(t *testing.T, c *actor.Client, r records.Ref, timeout time.Duration, done func([]records.Record) bool) []records.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sub, err := c.Subscribe(ctx, r, actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	var got []records.Record
	for rec, err := range sub {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, rec); done(got) {
			return got
		}
	}
	t.Fatalf("outbox of %s: %d records after %s, not what the test waits for", r, len(got), timeout)
	return nil
}

// stateDocs decodes the state records among recs, checking their envelope.
func stateDocs(t *testing.T, self records.Ref, recs []records.Record) []actor.Document {
	t.Helper()
	var docs []actor.Document
	for _, rec := range recs {
		if rec.Type != actor.TypeState {
			continue
		}
		if rec.From != self || rec.ContentType != records.ContentJSON || rec.Cause == "" {
			t.Fatalf("state record %+v: want From %s, JSON, a cause", rec, self)
		}
		var doc actor.Document
		if err := json.Unmarshal(rec.Payload, &doc); err != nil {
			t.Fatalf("state record %s: %v", rec.ID, err)
		}
		docs = append(docs, doc)
	}
	return docs
}

// TestStateRecords: a kind with StateRecords writes a state record after
// each state write, in the process of the record that caused it, with the
// new state and seq; sequences only grow and the last shows the final
// state. A kind without it writes none.
func TestStateRecords(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil, tallyKind(true, 0))
	c := newClient(t, conn)
	t1 := ref("tally", "t1")
	if _, err := c.Create(ctxT(t), t1, nil); err != nil {
		t.Fatal(err)
	}
	sent := map[string]string{} // record id → process
	var lastSeq uint64
	for i := range 30 {
		rec, _ := records.New("tick", nil)
		rec.Process = fmt.Sprint("p", i%3)
		s, err := c.Send(ctxT(t), t1, rec)
		if err != nil {
			t.Fatal(err)
		}
		sent[s.ID], lastSeq = s.Process, s.Seq
	}
	recs := outbox(t, c, t1, 30*time.Second, func(got []records.Record) bool {
		docs := stateDocs(t, t1, got)
		return len(docs) > 0 && docs[len(docs)-1].Seq == lastSeq
	})
	docs := stateDocs(t, t1, recs)
	ids := map[string]bool{}
	prev := actor.Document{}
	j := 0
	for _, rec := range recs {
		if rec.Type != actor.TypeState {
			continue
		}
		doc := docs[j]
		j++
		if ids[rec.ID] {
			t.Fatalf("state record id %s twice", rec.ID)
		}
		ids[rec.ID] = true
		proc, ok := sent[rec.Cause]
		if !ok || rec.Process != proc {
			t.Fatalf("state record %s: cause %q process %q, want a record sent and its process (%q)", rec.ID, rec.Cause, rec.Process, proc)
		}
		var st tallyState
		if err := doc.Decode(&st); err != nil {
			t.Fatal(err)
		}
		var pst tallyState
		if prev.State != nil {
			_ = prev.Decode(&pst)
		}
		if doc.Seq <= prev.Seq || st.N <= pst.N || doc.Status != actor.StatusIdle && doc.Status != actor.StatusProcessing {
			t.Fatalf("state record %s: seq %d n %d status %s after seq %d n %d", rec.ID, doc.Seq, st.N, doc.Status, prev.Seq, pst.N)
		}
		prev = doc
	}
	var last tallyState
	if err := prev.Decode(&last); err != nil || last.N != 30 {
		t.Fatalf("last state record: n %d (%v), want 30", last.N, err)
	}
	t.Logf("30 records, %d state writes shown", len(docs))

	// A kind without state records: outputs only.
	_, conn2 := server(t)
	startNode(t, conn2, nil, tallyKind(false, 0))
	c2 := newClient(t, conn2)
	if _, err := c2.Create(ctxT(t), t1, nil); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		rec, _ := records.New("tick", nil)
		if _, err := c2.Send(ctxT(t), t1, rec); err != nil {
			t.Fatal(err)
		}
	}
	recs = outbox(t, c2, t1, 30*time.Second, func(got []records.Record) bool { return len(got) == 5 })
	for _, rec := range recs {
		if rec.Type != "ticked" {
			t.Fatalf("kind without StateRecords wrote a %q record", rec.Type)
		}
	}
}

// TestStateRecordAfterCrash: a node dies between a state write and the
// acknowledgement (and so before or after the state record); the next node
// skips the applied record and writes its state record again with the same
// id, so the outbox has exactly one state record per write.
func TestStateRecordAfterCrash(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	var crashSeq atomic.Uint64
	crashed := make(chan struct{})
	node := startNode(t, conn, func(n *actor.Node) {
		n.SetCrash(func(p actor.CrashPoint, r records.Ref, seq uint64) bool {
			if p == actor.AfterState && seq == crashSeq.Load() {
				close(crashed)
				return true
			}
			return false
		})
	}, tallyKind(true, 1))
	c := newClient(t, conn)
	t1 := ref("tally", "t1")
	if _, err := c.Create(ctxT(t), t1, nil); err != nil {
		t.Fatal(err)
	}
	send := func() records.Record {
		rec, _ := records.New("tick", nil)
		s, err := c.Send(ctxT(t), t1, rec)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := send()
	crashSeq.Store(first.Seq + 1)
	second := send()
	if second.Seq != first.Seq+1 {
		t.Fatalf("sequences %d then %d", first.Seq, second.Seq)
	}
	<-crashed
	node.Stop(t)
	startNode(t, conn, nil, tallyKind(true, 1))
	third := send()
	recs := outbox(t, c, t1, 30*time.Second, func(got []records.Record) bool {
		docs := stateDocs(t, t1, got)
		return len(docs) > 0 && docs[len(docs)-1].Seq == third.Seq
	})
	docs := stateDocs(t, t1, recs)
	var seqs []uint64
	for _, d := range docs {
		seqs = append(seqs, d.Seq)
	}
	if len(seqs) != 3 || seqs[0] != first.Seq || seqs[1] != second.Seq || seqs[2] != third.Seq {
		t.Fatalf("state records of seqs %v, want one each of %d %d %d", seqs, first.Seq, second.Seq, third.Seq)
	}
}

// TestReservedOutputTypes: logic may not emit state or end records on its
// own outbox; the record goes to dead letters at once.
func TestReservedOutputTypes(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	k := actor.Kind[tallyState]{Name: "forger", Logic: func(ctx *actor.Context, s tallyState) (tallyState, error) {
		return s, ctx.Emit(ctx.Record().Type, nil)
	}}
	startNode(t, conn, nil, k)
	c := newClient(t, conn)
	f := ref("forger", "f1")
	if _, err := c.Create(ctxT(t), f, nil); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{actor.TypeEnd, actor.TypeState} {
		rec, _ := records.New(typ, nil)
		if _, err := c.Send(ctxT(t), f, rec); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead, err := c.DeadLetters(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for dl, err := range dead {
		if err != nil {
			t.Fatal(err)
		}
		if dl.Reason != "rejected" {
			t.Fatalf("dead letter reason %q (%s), want rejected", dl.Reason, dl.Error)
		}
		if n++; n == 2 {
			break
		}
	}
}

// TestTerminateEndsSubscribe: terminating an effector writes an end record
// to its outbox; a subscription yields it last and ends with no error, and
// so does one started after the end. Terminating again writes no second
// end record.
func TestTerminateEndsSubscribe(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	startNode(t, conn, nil)
	c := newClient(t, conn)
	c1 := ref("counter", "c1")
	if _, err := c.Create(ctxT(t), c1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub, err := c.Subscribe(ctx, c1)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		types []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for rec, err := range sub {
			if err != nil {
				r.err = err
				break
			}
			r.types = append(r.types, rec.Type)
		}
		done <- r
	}()
	publishIncs(t, conn, c1, 3)
	waitCount(t, conn, c, c1, 3, 30*time.Second)
	doc, err := c.Terminate(ctxT(t), c1)
	if err != nil || doc.Status != actor.StatusTerminated {
		t.Fatalf("terminate: %+v %v", doc, err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the subscription did not end after the effector was terminated")
	}
	if r.err != nil || len(r.types) != 4 || r.types[3] != actor.TypeEnd {
		t.Fatalf("subscription gave %v, err %v; want 3 count records then end, no error", r.types, r.err)
	}
	if _, err := c.Terminate(ctxT(t), c1); err != nil {
		t.Fatal(err)
	}
	// A subscription from the start replays and ends at the end record;
	// the outbox holds one end record.
	recs := outbox(t, c, c1, 30*time.Second, func(got []records.Record) bool {
		return got[len(got)-1].Type == actor.TypeEnd
	})
	if len(recs) != 4 {
		t.Fatalf("outbox replay: %d records, want 4", len(recs))
	}
	ends := 0
	info, err := conn.JetStream().Stream(ctxT(t), conn.Names().OutboxStream())
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= info.CachedInfo().State.LastSeq; seq++ {
		m, err := info.GetMsg(ctxT(t), seq)
		if err != nil {
			continue
		}
		if m.Header.Get(records.HeaderType) == actor.TypeEnd {
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("%d end records in the outbox stream, want 1", ends)
	}
	// Send to a terminated effector still fails as before.
	rec, _ := records.New("inc", nil)
	if _, err := c.Send(ctxT(t), c1, rec); !errors.Is(err, actor.ErrTerminated) {
		t.Fatalf("send after terminate: %v, want ErrTerminated", err)
	}
}
