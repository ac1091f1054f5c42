package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// fillLists writes n orchestrations (two revisions each: RUNNING, then
// WAITING or COMPLETED) to the orchestration bucket and n dead letters of
// 100 effectors and 100 owners to the dead-letter stream, as supervisors
// and nodes write them.
func fillLists(b *testing.B, e *env, n int) {
	b.Helper()
	ctx := context.Background()
	js, err := jetstream.New(e.conn.NATS(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	names := e.conn.Names()
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: names.OrchBucket(), History: 5}); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	published := 0
	settle := func() { // keep the async window from stalling on a loaded machine
		if published++; published%1000 == 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publishing did not complete")
			}
		}
	}
	for rev := range 2 {
		for i := range n {
			o := store.Orchestration{ID: fmt.Sprintf("ORCH%08d", i), Name: "demo", Status: "RUNNING", Step: "a", Steps: rev + 1,
				Owner: "u" + strconv.Itoa(i%100), Created: now, Updated: now}
			if rev == 1 {
				o.Status = []string{"WAITING", "COMPLETED"}[i%2]
			}
			data, err := codec.Marshal(o)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.PublishAsync("$KV."+names.OrchBucket()+"."+o.ID, data); err != nil {
				b.Fatal(err)
			}
			settle()
		}
	}
	for i := range n {
		m := nats.NewMsg(names.Dead(records.Ref{Kind: "counter", ID: "c" + strconv.Itoa(i%100)}))
		m.Header.Set(records.HeaderID, records.DeadID(fmt.Sprintf("rec-%d", i)))
		m.Header.Set(records.HeaderType, "explode")
		m.Header.Set(records.HeaderOwner, "u"+strconv.Itoa(i%100))
		m.Header.Set(records.HeaderDeadReason, "rejected")
		m.Header.Set(records.HeaderError, "invalid: unknown record type \"explode\"")
		m.Data = make([]byte, 128)
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		settle()
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		b.Fatal("publishing did not complete")
	}
}

// BenchmarkLists measures one page of 50 of the console's lists
// (ListOrchestrations and DeadLetters, newest first) with 100 and 10,000
// orchestrations and dead letters, beside the existing oldest-first
// Orchestrations page as the baseline. A user's dead letters (owner u7,
// 1 in 100) show what the owner filter costs without an index.
func BenchmarkLists(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 10_000} {
		e := newEnv(b)
		fillLists(b, e, n)
		run := func(name string, f func() (int, error)) {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				got := 0
				for b.Loop() {
					k, err := f()
					if err != nil {
						b.Fatal(err)
					}
					got = k
				}
				b.ReportMetric(float64(got), "items/page")
			})
		}
		run("baseline=Orchestrations", func() (int, error) {
			p, err := e.client.Orchestrations(ctx, store.OrchQuery{Limit: 50})
			return len(p.Orchestrations), err
		})
		run("ListOrchestrations-newest", func() (int, error) {
			p, err := e.client.ListOrchestrations(ctx, store.OrchListQuery{Order: store.NewestFirst, Limit: 50})
			return len(p.Orchestrations), err
		})
		run("ListOrchestrations-newest-WAITING", func() (int, error) {
			p, err := e.client.ListOrchestrations(ctx, store.OrchListQuery{Status: "WAITING", Order: store.NewestFirst, Limit: 50})
			return len(p.Orchestrations), err
		})
		run("DeadLetters-newest", func() (int, error) {
			p, err := e.client.DeadLetters(ctx, store.DeadQuery{Order: store.NewestFirst, Limit: 50})
			return len(p.DeadLetters), err
		})
		run("DeadLetters-newest-effector", func() (int, error) {
			p, err := e.client.DeadLetters(ctx, store.DeadQuery{Kind: "counter", ID: "c7", Order: store.NewestFirst, Limit: 50})
			return len(p.DeadLetters), err
		})
		run("DeadLetters-newest-owner", func() (int, error) {
			p, err := e.client.DeadLetters(ctx, store.DeadQuery{Owner: "u7", Order: store.NewestFirst, Limit: 50})
			return len(p.DeadLetters), err
		})
	}
}
