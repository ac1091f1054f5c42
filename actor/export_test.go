package actor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/effectors/effectors/records"
)

// Crash points for tests.
const (
	AfterOutputs = afterOutputs
	AfterState   = afterState
)

// CrashPoint is a processing step at which a test makes the node die.
type CrashPoint = crashPoint

// SetCrash makes the node die where fn says; call before Run.
func (n *Node) SetCrash(fn func(point CrashPoint, ref records.Ref, seq uint64) bool) { n.crash = fn }

// SetAnswerLost makes the answer to a stored state write lost, and the
// effector's partition given up, where fn says; call before Run.
func (n *Node) SetAnswerLost(fn func(ref records.Ref, seq uint64) bool) { n.answerLost = fn }

// SetOwner overrides placement's owner of partition num of kind where fn
// returns true; call before Run.
func (n *Node) SetOwner(fn func(kind string, num int) (string, bool)) { n.ownerHook = fn }

// SetSteal makes placement take leases of live nodes while fn returns true;
// call before Run.
func (n *Node) SetSteal(fn func() bool) { n.stealHook = fn }

// Reading reports how many partitions the node reads.
func (n *Node) Reading() int { return len(n.partitions()) }

// Debug describes what the node reads and the leases it knows.
func (n *Node) Debug() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s reads %d partitions; goroutines %v %v; loaded:", n.ID(), len(n.partitions()), n.placeLoops.Running(), n.watchLoop.Running())
	for _, e := range n.driven() {
		e.mu.Lock()
		fmt.Fprintf(&b, " %s(partition %d held %d running %v stopped %v seq %d maxseen %d own-consumer %v)", e.ref, e.part.num, len(e.held), e.running, e.stopped, e.doc.Seq, e.maxSeen, e.ovf != nil)
		e.mu.Unlock()
	}
	place := n.place.Load()
	place.mu.Lock()
	fmt.Fprintf(&b, "; leases:")
	for s, l := range place.leases {
		fmt.Fprintf(&b, " %s=%s@%d", s, l.node, l.rev)
	}
	place.mu.Unlock()
	// The partitions whose consumer has records not yet acknowledged, with
	// what the server says of them and what the reading expects next.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Fprintf(&b, "; partitions behind:")
	for _, p := range n.partitions() {
		info, err := n.streamOf(p.num).Consumer(ctx, p.name)
		if err != nil {
			fmt.Fprintf(&b, " %s(err %v)", p.name, err)
			continue
		}
		ci := info.CachedInfo()
		if ci.NumPending == 0 && ci.NumAckPending == 0 {
			continue
		}
		p.mu.Lock()
		fmt.Fprintf(&b, " %s(lease %d next %d lost %v stopped %v deferred %d cc %v; delivered %d/%d ackfloor %d/%d pending %d ackpending %d redelivered %d waiting %d groups %+v)",
			p.name, p.lease, p.next, p.lost, p.stopped, len(p.deferred), p.cc != nil,
			ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream,
			ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.PriorityGroups)
		p.mu.Unlock()
	}
	return b.String()
}

// ReadingKeys returns the lease keys of the partitions the node reads.
func (n *Node) ReadingKeys() []string {
	place := n.place.Load()
	if place == nil {
		return nil
	}
	place.readMu.Lock()
	defer place.readMu.Unlock()
	out := make([]string, 0, len(place.reading))
	for s := range place.reading {
		out = append(out, n.names.LeaseKey(s.kind, s.num))
	}
	return out
}

// MayDrop reports whether the node's reading of partition num of kind may
// acknowledge a record it does not apply now (see "Drops"); false when it
// does not read it.
func (n *Node) MayDrop(kind string, num int) bool {
	for _, p := range n.partitions() {
		if p.kind.name == kind && p.num == num {
			return p.mayDrop(n.runCtx)
		}
	}
	return false
}

// DropCheck is MayDrop bound to the reading of partition num of kind the
// node has now (nil if none): it goes on asking that reading after the node
// has opened the partition again under another lease.
func (n *Node) DropCheck(kind string, num int) func() bool {
	for _, p := range n.partitions() {
		if p.kind.name == kind && p.num == num {
			return func() bool { return p.mayDrop(n.runCtx) }
		}
	}
	return nil
}

// Goroutines returns the node's long-lived goroutines running now, by name.
func (n *Node) Goroutines() map[string]int {
	out := map[string]int{}
	for k, v := range n.placeLoops.Running() {
		out[k] += v
	}
	for k, v := range n.watchLoop.Running() {
		out[k] += v
	}
	return out
}
