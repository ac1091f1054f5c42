//go:build unix

package actor_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
)

// BenchmarkClusterGroups drives counters through their mailboxes on a
// 3-server in-process cluster (every stream and bucket in 3 replicas, two
// nodes) with one stream (groups=1) and with 3 stream groups (groups=3), and
// reports the hop rate and, per server, the stream writes it led (the
// sequences added to the streams it leads: mailboxes, outboxes, state) and
// its message counters (/varz in_msgs, out_msgs). Run it with
// -benchtime 1x: each iteration is one load of counters×per records on a
// new cluster.
func BenchmarkClusterGroups(b *testing.B) {
	for _, g := range []int{1, 3} {
		b.Run(fmt.Sprintf("groups=%d", g), func(b *testing.B) {
			for range b.N {
				clusterGroupsLoad(b, g)
			}
		})
	}
}

// cpuTime is the CPU time (user and system) the process used so far: the
// three servers, the nodes and the publishers together.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func clusterGroupsLoad(b *testing.B, groups int) {
	const (
		counters = 200
		per      = 30
		total    = counters * per
	)
	b.StopTimer()
	cl := bustest.NewCluster(b, 3)
	names, _ := bus.NewNames("ea")
	names, _ = names.WithPartitions(clusterPartitions)
	if groups > 1 {
		cl.MapMailboxes(b, names) // with one stream it would turn every mailbox publish away
	}
	cfg := bus.Config{Replicas: 3, Partitions: clusterPartitions, Groups: groups}
	conn := cl.Connect(b, cfg)
	names = conn.Names()
	var nodes []*runningNode
	for range 2 {
		nodes = append(nodes, startNodeWith(b, cl.Connect(b, cfg), clusterPlacement, nil))
	}
	c := newClient(b, conn)
	refs := createCounters(b, c, counters)
	streams := append(names.MailboxStreams(), names.OutboxStreams()...)
	for _, s := range names.StateBuckets() {
		streams = append(streams, "KV_"+s)
	}
	lastSeqs := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, s := range streams {
			st, err := conn.JetStream().Stream(ctxT(b), s)
			if err != nil {
				b.Fatal(err)
			}
			out[s] = st.CachedInfo().State.LastSeq
		}
		return out
	}
	traffic := func() map[string]bus.Traffic {
		out := map[string]bus.Traffic{}
		for _, s := range cl.Servers {
			out[s.Name] = s.Traffic()
		}
		return out
	}
	processed := func() float64 { return processedBy(b, nodes) }
	base := processed()
	seq0, tr0 := lastSeqs(), traffic()
	cpu0 := cpuTime(b)
	start := time.Now()
	b.StartTimer()
	var acked atomic.Int64
	if err := publishResilient(conn, groupLoads(refs, per), 8, time.Now().Add(2*time.Minute), &acked); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for processed()-base < total {
		if time.Now().After(deadline) {
			b.Fatalf("%v of %d records processed after 2 minutes", processed()-base, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	seq1, tr1 := lastSeqs(), traffic()
	for _, r := range refs[:10] {
		waitCountOnly(b, c, r, per, 30*time.Second)
	}
	led := map[string]uint64{}
	var lines []string
	for _, s := range streams {
		leader := cl.StreamLeader(b, s).Name
		led[leader] += seq1[s] - seq0[s]
		lines = append(lines, fmt.Sprintf("%s led by %s: %d writes", s, leader, seq1[s]-seq0[s]))
	}
	secs := elapsed.Seconds()
	b.ReportMetric(total/secs, "rec/s")
	b.ReportMetric(float64(cpu.Microseconds())/total, "cpu_us/rec")
	for _, s := range cl.Servers {
		in, out := tr1[s.Name].InMsgs-tr0[s.Name].InMsgs, tr1[s.Name].OutMsgs-tr0[s.Name].OutMsgs
		suffix := strings.TrimPrefix(s.Name, "ea-test-")
		b.ReportMetric(float64(led[s.Name])/secs, "led_writes/s_srv"+suffix)
		b.ReportMetric(float64(in)/secs, "in_msgs/s_srv"+suffix)
		b.ReportMetric(float64(out)/secs, "out_msgs/s_srv"+suffix)
	}
	slices.Sort(lines)
	b.Logf("groups=%d: %d records in %s; %s", groups, total, elapsed.Round(time.Millisecond), strings.Join(lines, "; "))
}
