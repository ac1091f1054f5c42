package actor_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

// Timer benchmark shape: timers spread over effectors, all due at once.
const (
	benchTimerEffectors = 10
	benchTimersPer      = 500
)

// BenchmarkTimers sets 5,000 timers from logic (ten effectors, one record
// each setting 500), all due at the same instant a few seconds ahead, and
// measures: timers set per second (from the arm records' publish until
// every schedule is stored), timers fired per second (from the due time
// until the last fired record is in its mailbox), and the lateness of each
// fired record (its mailbox store time minus its due time), p50 and p99.
// The baseline sub-benchmark delivers the same records with in-process Go
// timers (time.AfterFunc publishing to the mailbox at the due time), read
// the same way: what the mechanism costs beyond "a timer and a publish".
func BenchmarkTimers(b *testing.B) {
	// burst: all 5,000 due at once; spread: one every 2 ms per effector
	// (5,000 over a second, 5,000/s).
	// light: 20 per effector, one every 50 ms per effector (200 over a
	// second).
	b.Run("burst/schedules", func(b *testing.B) { benchTimers(b, false, benchTimersPer, 0) })
	b.Run("burst/baseline-go-timers", func(b *testing.B) { benchTimers(b, true, benchTimersPer, 0) })
	b.Run("spread/schedules", func(b *testing.B) { benchTimers(b, false, benchTimersPer, 2*time.Millisecond) })
	b.Run("spread/baseline-go-timers", func(b *testing.B) { benchTimers(b, true, benchTimersPer, 2*time.Millisecond) })
	b.Run("light/schedules", func(b *testing.B) { benchTimers(b, false, 20, 50*time.Millisecond) })
	b.Run("light/baseline-go-timers", func(b *testing.B) { benchTimers(b, true, 20, 50*time.Millisecond) })
}

func benchTimers(b *testing.B, baseline bool, per int, spread time.Duration) {
	_, conn := server(b)
	var attempts atomic.Int64
	startNode(b, conn, nil, alarmKind(&attempts))
	c := newClient(b, conn)
	ctx := ctxT(b)
	ts, err := conn.TimerStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	total := benchTimerEffectors * per
	var late, fwd, srvLate []time.Duration
	var setRate, fireRate []float64
	for i := range b.N {
		refs := make([]records.Ref, benchTimerEffectors)
		for j := range refs {
			refs[j] = ref("alarm", fmt.Sprintf("b%d-%d", i, j))
			actortest.Create(b, c, refs[j], nil)
		}
		due := time.Now().Add(6 * time.Second).Truncate(time.Millisecond)
		before, err := ts.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if baseline {
			for _, r := range refs {
				for k := range per {
					at := due.Add(time.Duration(k) * spread)
					rec, err := records.New("ring", ring{Key: fmt.Sprint("k", k), Due: at})
					if err != nil {
						b.Fatal(err)
					}
					time.AfterFunc(time.Until(at), func() {
						_, _ = c.Send(ctx, r, rec)
					})
				}
			}
		} else {
			for _, r := range refs {
				sendArm(b, c, r, arm{Key: "k", N: per, At: due, Spread: spread})
			}
			actortest.Eventually(b, time.Minute, "every schedule stored", func() bool {
				info, err := ts.Info(ctx)
				return err == nil && info.State.LastSeq-before.State.LastSeq >= uint64(total)
			})
			setRate = append(setRate, float64(total)/time.Since(start).Seconds())
		}
		for _, r := range refs {
			actortest.Eventually(b, 2*time.Minute, "every timer of "+r.String()+" rings", func() bool {
				s, err := stateOf(c, r)
				return err == nil && len(s.Rings) == per
			})
		}
		var last time.Time
		for _, r := range refs {
			for _, m := range mailboxRecords(b, conn, r) {
				if m.Header.Get(records.HeaderType) != "ring" {
					continue
				}
				var rg ring
				if err := codec.Unmarshal(m.Data, &rg); err != nil {
					b.Fatal(err)
				}
				late = append(late, m.Time.Sub(rg.Due))
				if fired, err := time.Parse(time.RFC3339Nano, m.Header.Get(actor.HeaderTimerDue)); err == nil {
					fwd = append(fwd, m.Time.Sub(fired))
					srvLate = append(srvLate, fired.Sub(rg.Due))
				}
				if m.Time.After(last) {
					last = m.Time
				}
			}
		}
		fireRate = append(fireRate, float64(total)/last.Sub(due).Seconds()) // from the first due time
	}
	if len(late) != total*b.N {
		b.Fatalf("%d fired records, want %d", len(late), total*b.N)
	}
	slices.Sort(late)
	slices.Sort(fwd)
	slices.Sort(srvLate)
	if len(fwd) > 0 {
		b.Logf("server firing lateness p50 %s p99 %s; forward p50 %s p99 %s", srvLate[len(srvLate)/2], srvLate[len(srvLate)*99/100], fwd[len(fwd)/2], fwd[len(fwd)*99/100])
	}
	b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "late-p50-ms")
	b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "late-p99-ms")
	b.ReportMetric(mean(fireRate), "fired/s")
	if !baseline {
		b.ReportMetric(mean(setRate), "set/s")
	}
	b.ReportMetric(0, "ns/op")
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
